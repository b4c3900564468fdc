"""`goma-ext index FILE [--json]`: print a ThinLTO index's module table, flags and summary counts."""

from __future__ import annotations

import argparse
import json
from typing import Any

from goma_ext.bitcode.index import ThinLtoIndex, read_index


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("index", help="decode a ThinLTO index (FILE.thinlto.bc) and print its module table")
    p.add_argument("file", help="the index file")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=run)


def to_json(index: ThinLtoIndex) -> dict[str, Any]:
    return {
        "path": index.path,
        "empty": index.empty,
        "version": index.version,
        "bitcode_version": index.bitcode_version,
        "flags": index.flags,
        "flag_names": list(index.flag_names),
        "skip": index.skip,
        "modules": [
            {"modid": m.modid, "path": m.path, "hash": m.hash_hex, "summaries": index.summary_counts.get(m.path, 0)}
            for m in index.modules
        ],
        "summary_counts": dict(index.summary_counts),
    }


def to_text(index: ThinLtoIndex) -> str:
    if index.empty:
        return f"{index.path}: empty (zero-byte) index: no imports\n"
    flags = ", ".join(index.flag_names) or "none"
    lines = [
        f"{index.path}: summary version {index.version}, flags 0x{index.flags:x} ({flags}), "
        f"skip {'yes' if index.skip else 'no'}, {len(index.modules)} modules",
        f"{'modid':>5}  {'sha1':40}  {'summaries':>9}  path",
    ]
    for m in index.modules:
        lines.append(f"{m.modid:>5}  {m.hash_hex or '-':40}  {index.summary_counts.get(m.path, 0):>9}  {m.path}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    index = read_index(args.file)
    print(json.dumps(to_json(index), indent=2) if args.json else to_text(index), end="\n" if args.json else "")
    return 0
