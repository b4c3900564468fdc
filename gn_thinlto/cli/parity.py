"""`gn-thinlto parity OUT_INPROC OUT_GRAPH`: one line per binary present in both build directories; exit 0 when
every binary is at parity. What is compared, and why the tolerance defaults to 0: gn_thinlto.analysis.parity."""

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
