"""Where a ThinLTO backend writes its split DWARF: a pure naming rule shared by the planner (the backend edge
declares the .dwo as an output) and the backend step (which caches it and keeps its name in the object)."""

from __future__ import annotations

import os
from collections.abc import Sequence


def split_dwarf_mode(argv: Sequence[str]) -> str:
    """The debug fission mode a command line asks for: "split", "single" or "" (the last such flag wins)."""
    mode = ""
    for a in argv:
        if a in ("-gsplit-dwarf", "-gsplit-dwarf=split"):
            mode = "split"
        elif a == "-gsplit-dwarf=single":
            mode = "single"
        elif a == "-gno-split-dwarf":
            mode = ""
    return mode


def split_dwarf_file(argv: Sequence[str], output: str) -> str:
    """The .dwo file a backend command writes beside OUTPUT (clang's -gsplit-dwarf, split mode): OUTPUT with its
    extension replaced by .dwo, as clang names it; "" without split DWARF or with -gsplit-dwarf=single."""
    if split_dwarf_mode(argv) != "split":
        return ""
    stem, ext = os.path.splitext(output)
    return (stem if ext else output) + ".dwo"
