"""The exact input and output set of one backend command, from goma_ext.inputs.backend, for the remote action."""

from __future__ import annotations

import importlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.reapi.errors import InputError


@dataclass(frozen=True)
class ActionFiles:
    """Inputs and outputs of one command, relative to its working directory."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _from_goma_inputs(argv: Sequence[str], cwd: Path) -> ActionFiles | None:
    try:
        mod = importlib.import_module("goma_ext.inputs.backend")
    except ImportError:
        return None
    fn = getattr(mod, "backend_inputs", None)
    if fn is None:
        return None
    try:
        result = fn(list(argv), cwd)
    except GomaExtError as e:
        raise InputError(f"cannot determine backend inputs: {e}") from e
    inputs = getattr(result, "paths", None)
    output = getattr(result, "output", None)
    if inputs is None or not output:
        raise InputError("backend command has no inputs or no -o output")
    outputs = (output, *split_dwarf_outputs(argv))
    return ActionFiles(tuple(str(p) for p in inputs), tuple(str(p) for p in outputs))


def split_dwarf_outputs(argv: Sequence[str]) -> tuple[str, ...]:
    """The .dwo file a backend also writes under split DWARF, named by `-Xclang -split-dwarf-output -Xclang F`
    (gn-thinlto's backend step always names it so). A bare -gsplit-dwarf is refused: the file clang would
    derive from -o would not be declared as an output, and the remote result would lack it."""
    named = tuple(argv[i + 3] for i in range(len(argv) - 3)
                  if argv[i] == argv[i + 2] == "-Xclang" and argv[i + 1] == "-split-dwarf-output")
    if not named and any(a in ("-gsplit-dwarf", "-gsplit-dwarf=split") for a in argv):
        raise InputError("-gsplit-dwarf without -Xclang -split-dwarf-output: the .dwo output is not named")
    return named


def _expand_rsp(argv: Sequence[str], cwd: Path, files: list[str]) -> list[str]:
    out: list[str] = []
    for arg in argv:
        if arg.startswith("@"):
            files.append(arg[1:])
            try:
                out.extend(shlex.split((cwd / arg[1:]).read_text()))
            except OSError as e:
                raise InputError(f"response file {arg[1:]}: {e.strerror}") from e
        else:
            out.append(arg)
    return out


def _minimal(argv: Sequence[str], cwd: Path) -> ActionFiles:
    """Enough of clang's backend command line for -fthinlto-index= actions: bitcode, index, imports, -o."""
    from goma_ext.bitcode.index import read_index

    extra: list[str] = []
    args = _expand_rsp(argv[1:], cwd, extra)
    index = output = None
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-fthinlto-index="):
            index = a.split("=", 1)[1]
        elif a == "-o" and i + 1 < len(args):
            output, i = args[i + 1], i + 1
        elif a in ("-x", "-target", "-Xclang", "-mllvm") and i + 1 < len(args):
            i += 1
        elif a.startswith(("-fprofile-use=", "-fprofile-sample-use=")):
            extra.append(a.split("=", 1)[1])
        elif not a.startswith("-"):
            positional.append(a)
        i += 1
    if index is None or output is None or not positional:
        raise InputError("not a ThinLTO backend command (needs -fthinlto-index=, an input and -o)")
    try:
        modules = [m.path for m in read_index(cwd / index, summaries=False).modules]
    except GomaExtError as e:
        raise InputError(f"cannot read index {index}: {e}") from e
    inputs = [*positional, index, *modules, *extra]
    return ActionFiles(tuple(dict.fromkeys(inputs)), (output, *split_dwarf_outputs(argv)))


def action_files(argv: Sequence[str], cwd: Path) -> ActionFiles:
    """Inputs/outputs of a backend command relative to cwd."""
    if not argv:
        raise InputError("empty command")
    return _from_goma_inputs(argv, cwd) or _minimal(argv, cwd)
