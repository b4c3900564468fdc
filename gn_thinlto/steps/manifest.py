"""A thin link's manifest (OUT/gn-thinlto/…/thinlink.json, written by the hook) read back and checked: the
thin-link step, `explain` and `trace` all read it, and a damaged one is one GnThinltoError naming the file and
the key, never a KeyError or TypeError deep inside a reader. Standard library only (the step runs `python -S`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from gn_thinlto.errors import GnThinltoError, read_json, shown
from gn_thinlto.steps.thinlink_paths import MAX_PARTITIONS

PATH_MAX = 4096  # Linux: no longer path reaches the file system (os.makedirs would recurse on it first)

# key -> what its value must be. "path": a string the step opens or writes; "paths": a list of them; "command":
# a list of strings, not empty; "strings": a list of them, maybe empty.
SCHEMA: dict[str, str] = {
    "target": "string", "final_output": "path", "used_list": "path", "stage_dir": "path", "index_dir": "path",
    "native_dir": "path", "rsp_path": "path", "final_rsp": "path", "dyndep": "path", "staged_used_list": "path",
    "why_extract": "path", "state": "path", "argv": "command", "rsp_lines": "strings", "bitcode": "paths",
    "inputs": "paths", "eager_inputs": "paths", "lazy_natives": "paths", "split_object": "path pair",
    "minimized": "pairs", "partition_dir": "path", "partitions": "count", "partition_mode": "string",
}
# `state` and `inputs` (the fingerprint's) are absent from manifests written before the fingerprint existed;
# the partition keys from those written before partition edges (and from links without them).
EVERY_KEY = frozenset(SCHEMA) - {"state", "inputs", "partition_dir", "partitions", "partition_mode"}


def _bad_string(value: Any, path: bool) -> str | None:
    """Why VALUE cannot be a manifest string (a path when PATH), or None."""
    if not isinstance(value, str):
        return "not a string"
    if "\0" in value:
        return "a string with a NUL byte"
    if path and len(value.encode(errors="surrogateescape")) >= PATH_MAX:
        return f"a path of {len(value)} characters, longer than the system allows"
    return None


def _problem(kind: str, value: Any) -> str | None:
    """Why VALUE is not of KIND (see SCHEMA), or None."""
    if kind in ("string", "path"):
        return _bad_string(value, kind == "path")
    if kind == "count":  # of partition edges
        return None if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_PARTITIONS \
            else f"not an integer 0-{MAX_PARTITIONS}"
    if not isinstance(value, list):
        return "not a list"
    if kind == "command" and not value:
        return "empty"
    if kind == "path pair" and len(value) != 2:
        return f"{len(value)} items, not 2"
    if kind == "pairs":
        if not all(isinstance(pair, list) and len(pair) == 2 for pair in value):
            return "an item is not a pair"
        value = [x for pair in value for x in pair]
    paths = kind not in ("command", "strings")
    return next((f"an item is {why}" for x in value if (why := _bad_string(x, paths))), None)


def check_manifest(m: Any, name: str | os.PathLike[str], required: Iterable[str] = EVERY_KEY) -> dict[str, Any]:
    """M (decoded JSON of the manifest file NAME) when every REQUIRED key is there and every key of SCHEMA
    present has the right kind of value; else GnThinltoError naming the file and the key."""
    if not isinstance(m, dict):
        raise GnThinltoError(f"{shown(name)}: not a thin-link manifest (a JSON object); run `gn gen` again")
    missing = sorted(set(required) - set(m))
    if missing:
        raise GnThinltoError(f"{shown(name)}: no {missing[0]!r} (written by another gn-thinlto? run `gn gen` again)")
    for key, kind in SCHEMA.items():
        why = _problem(kind, m[key]) if key in m else None
        if why:
            raise GnThinltoError(f"{shown(name)}: {key}: {why}; run `gn gen` again")
    return m


def read_manifest(path: str | os.PathLike[str], required: Iterable[str] = EVERY_KEY) -> dict[str, Any]:
    """The manifest at PATH, read and checked (check_manifest)."""
    return check_manifest(read_json(path, "thin-link manifest"), path, required)
