"""Escaping for ninja's two text contexts: paths in build lines, and variable values (commands)."""

from __future__ import annotations


def ninja_path(value: str) -> str:
    """Escape a path for a ninja build/inputs/outputs list ('$', ' ', ':' and newline are special)."""
    if "\n" in value:
        raise ValueError(f"newline in ninja path {value!r}")
    return value.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def ninja_value(value: str) -> str:
    """Escape a string for a ninja variable value, e.g. a command line (only '$' is special)."""
    if "\n" in value:
        raise ValueError(f"newline in ninja value {value!r}")
    return value.replace("$", "$$")
