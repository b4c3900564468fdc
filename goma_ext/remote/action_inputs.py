"""The exact input and output set of one backend command, from goma_ext.inputs.backend, for the remote action."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.inputs.backend import backend_inputs
from goma_ext.reapi.errors import InputError


@dataclass(frozen=True)
class ActionFiles:
    """Inputs and outputs of one command, relative to its working directory."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def action_files(argv: Sequence[str], cwd: Path) -> ActionFiles:
    """Inputs/outputs of a backend command relative to cwd."""
    if not argv:
        raise InputError("empty command")
    try:
        result = backend_inputs(list(argv), cwd)
    except GomaExtError as e:
        raise InputError(f"cannot determine backend inputs: {e}") from e
    if not result.output:
        raise InputError("backend command has no -o output")
    return ActionFiles(result.paths, (result.output, *split_dwarf_outputs(argv)))


def split_dwarf_outputs(argv: Sequence[str]) -> tuple[str, ...]:
    """The .dwo file a backend also writes under split DWARF, named by `-Xclang -split-dwarf-output -Xclang F`
    (gn-thinlto's backend step always names it so). A bare -gsplit-dwarf is refused: the file clang would
    derive from -o would not be declared as an output, and the remote result would lack it."""
    named = tuple(argv[i + 3] for i in range(len(argv) - 3)
                  if argv[i] == argv[i + 2] == "-Xclang" and argv[i + 1] == "-split-dwarf-output")
    if not named and any(a in ("-gsplit-dwarf", "-gsplit-dwarf=split") for a in argv):
        raise InputError("-gsplit-dwarf without -Xclang -split-dwarf-output: the .dwo output is not named")
    return named
