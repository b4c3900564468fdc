"""Escaping for ninja's two text contexts: paths in build lines, and variable values (commands)."""

from __future__ import annotations

from gn_thinlto.errors import GnThinltoError, shown


def ninja_path(value: str) -> str:
    """Escape a path for a ninja build/inputs/outputs list ('$', ' ', ':' and newline are special)."""
    if "\n" in value:
        raise GnThinltoError(f"a path with a newline cannot be written to a ninja file: {shown(repr(value))}")
    return value.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def ninja_value(value: str) -> str:
    """Escape a string for a ninja variable value, e.g. a command line (only '$' is special)."""
    if "\n" in value:
        raise GnThinltoError(f"a value with a newline cannot be written to a ninja file: {shown(repr(value))}")
    return value.replace("$", "$$")
