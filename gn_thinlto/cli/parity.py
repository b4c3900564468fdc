"""`gn-thinlto parity OUT_INPROC OUT_GRAPH`: do two builds' binaries hold the same code? For each linked ELF
binary present in both build directories: the same defined functions with the same sizes, the same allocated
sections' sizes, the same dynamic symbols. One line per binary; exit 0 when every binary is at parity.

The tolerance defaults to 0: gn-thinlto's backends reproduce lld's in-process code generation (the same
levels, section and relocation options), which gives byte-identical objects, so any size difference is a
routing bug to find, not noise. `--tolerance PCT` accepts each function and section within PCT percent of its
in-process size (for comparing against a toolchain whose backends are known to differ slightly).

Two section differences are lld's, not the backends', and are accounted for exactly: .relro_padding (NOBITS
padding to a page boundary, which follows the layout) is not compared; and lld parses the objects of its
in-process LTO ignoring their COMDAT groups (lld/ELF/Driver.cpp, compileBitcodeFiles: the groups were resolved on
the bitcode), so COMDAT data that code generation creates, the `DW.ref.__gxx_personality_v0` pointer of every
object with exception tables, is kept once per object in-process and once per binary from native objects
(the symbol names only the first): when both binaries define one and .data is 8*k bytes larger in-process,
.rela.dyn 24*k bytes larger or equal (a pointer and its dynamic relocation per copy, ELF64), both count as equal.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gn_thinlto.analysis.parity import compare_builds
from gn_thinlto.errors import GnThinltoError

WORST = 10
# Build-directory trees that hold objects, generated sources and gn-thinlto's own files, not linked binaries.
_SKIP_DIRS = frozenset({"obj", "gen", "gn-thinlto", "gn-edited"})
_LAYOUT_PADDING = frozenset({".relro_padding"})
_POINTER, _RELA = 8, 24  # bytes per DW.ref copy: the pointer in .data, its Elf64_Rela in .rela.dyn


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("parity", help="compare the code of two builds' binaries (in-process vs graph ThinLTO)")
    p.add_argument("inproc", type=Path, help="build directory linked with lld's in-process ThinLTO")
    p.add_argument("graph", type=Path, help="build directory built through gn-thinlto's graph")
    p.add_argument("--tolerance", type=float, default=0.0, metavar="PCT",
                   help="accept functions and sections within PCT percent of their in-process size (default 0)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    for d in (args.inproc, args.graph):
        if not d.is_dir():
            raise GnThinltoError(f"{d}: not a directory")
    results = compare_builds(args.inproc, args.graph, args.tolerance)
    for r in results:
        print(r.line())
    return 0 if all(r.at_parity for r in results) else 1
