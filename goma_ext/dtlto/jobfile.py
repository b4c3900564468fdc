"""The JSON file lld hands a DTLTO distributor, read strictly into typed jobs (layout of LLVM 22).

lld (`--thinlto-distributor=`) writes `{"common": {"linker_output", "args", "inputs"}, "jobs": [{"args",
"inputs", "outputs"}, …]}` and runs `DISTRIBUTOR <distributor args…> JSON`. A job's command is
`common.args + job.args`: the compiler and its code generation options, then `MODULE -fthinlto-index=INDEX
-o NATIVE`. Paths are relative to the link's working directory. Any other key or shape means an lld whose
layout we were not written for, and is refused with one line naming the file and the key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goma_ext.errors import GomaExtError, is_file, reason, shown

LAYOUT = "LLVM 22"
TOP_KEYS = frozenset({"common", "jobs"})
COMMON_KEYS = frozenset({"linker_output", "args", "inputs"})
JOB_KEYS = frozenset({"args", "inputs", "outputs"})


class JobFileError(GomaExtError):
    """The distributor's JSON is missing, malformed, or in a layout this version does not know."""


@dataclass(frozen=True)
class DistJob:
    """One backend: its whole command and the files lld says it reads and writes."""

    argv: tuple[str, ...]
    module: str
    index: str
    output: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class JobFile:
    path: Path
    linker_output: str
    common_inputs: tuple[str, ...]
    jobs: tuple[DistJob, ...]


def _layout_error(path: Path, where: str, what: str) -> JobFileError:
    return JobFileError(f"{path}: {where}: {what} (goma-ext reads the {LAYOUT} layout; is lld a different version?)")


def _keys(path: Path, where: str, value: Any, known: frozenset[str]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _layout_error(path, where, f"expected an object, found {type(value).__name__}")
    unknown = sorted(set(value) - known)
    if unknown:
        raise _layout_error(path, where, f"unknown key {unknown[0]!r}")
    missing = sorted(known - set(value))
    if missing:
        raise _layout_error(path, where, f"missing key {missing[0]!r}")
    return value


def _strings(path: Path, where: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _layout_error(path, where, "expected a list of strings")
    for n, v in enumerate(value):
        if "\0" in v or not _is_utf8(v):
            raise JobFileError(f"{path}: {where}[{n}]: {v!a} holds a NUL byte or a lone surrogate: no command "
                               "line argument or file name can")
    return tuple(value)


def _is_utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _job(path: Path, n: int, raw: Any, common_args: tuple[str, ...]) -> DistJob:
    where = f"jobs[{n}]"
    fields = _keys(path, where, raw, JOB_KEYS)
    args = _strings(path, f"{where}.args", fields["args"])
    inputs = _strings(path, f"{where}.inputs", fields["inputs"])
    outputs = _strings(path, f"{where}.outputs", fields["outputs"])
    index = next((a.split("=", 1)[1] for a in args if a.startswith("-fthinlto-index=")), None)
    output = args[args.index("-o") + 1] if "-o" in args[:-1] else None
    if not args or index is None or output is None or output not in outputs:
        raise _layout_error(path, f"{where}.args", "expected MODULE -fthinlto-index=INDEX -o OUTPUT, OUTPUT in outputs")
    return DistJob(
        argv=(*common_args, *args), module=args[0], index=index, output=output, inputs=inputs, outputs=outputs,
    )


def parse(path: Path, text: str) -> JobFile:
    """The jobs of TEXT (the content of PATH); JobFileError on anything we were not written for."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise JobFileError(f"{path}: not JSON ({e.msg} at line {e.lineno} column {e.colno}; truncated?)") from e
    except RecursionError as e:
        raise JobFileError(f"{path}: not an lld job file: {reason(e)}") from e
    top = _keys(path, "top level", doc, TOP_KEYS)
    common = _keys(path, "common", top["common"], COMMON_KEYS)
    args = _strings(path, "common.args", common["args"])
    if not args:
        raise _layout_error(path, "common.args", "empty (the compiler comes first)")
    if not isinstance(common["linker_output"], str) or not _is_utf8(common["linker_output"]):
        raise _layout_error(path, "common.linker_output", "expected a string")
    if not isinstance(top["jobs"], list):
        raise _layout_error(path, "jobs", "expected a list")
    jobs = tuple(_job(path, n, raw, args) for n, raw in enumerate(top["jobs"]))
    return JobFile(path, common["linker_output"], _strings(path, "common.inputs", common["inputs"]), jobs)


def load(path: Path) -> JobFile:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise JobFileError(
            f"{shown(path)}: no such job file (lld runs the distributor with its JSON path last)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise JobFileError(f"{shown(path)}: cannot read: {reason(e)}") from e
    return parse(path, text)


def check_inputs(jobs: JobFile, cwd: Path) -> None:
    """Every input lld named, and every job's module and index, must exist before anything runs (no partial
    outputs on bad input)."""
    names = (*jobs.common_inputs, *(i for job in jobs.jobs for i in (*job.inputs, job.module, job.index)))
    for name in dict.fromkeys(names):
        if not is_file(cwd / name, f"{jobs.path}: input"):
            raise JobFileError(f"{jobs.path}: input {shown(name)!r} does not exist (relative to {cwd})")


def remove_outputs(jobs: Sequence[DistJob], cwd: Path) -> None:
    """Remove what the jobs may have written, so that a failed run leaves no partial outputs."""
    for job in jobs:
        for out in job.outputs:
            try:
                os.unlink(cwd / out)
            except OSError:
                pass
