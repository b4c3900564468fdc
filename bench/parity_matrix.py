"""`python -m bench parity`: the example built with lld's in-process ThinLTO and through gn-thinlto's graph under
a matrix of Chromium's link configurations, compared by `gn-thinlto parity`; one line per configuration.

Every configuration links matrix_tool_lto_o0 with -Wl,--lto-O0 (as Chromium links most targets) and the other
binaries with --lto-O2 (Chromium's thinlto_optimize_max); each builds PIE executables, a shared library
(libcodec.so) and a loadable module (libreport_plugin.so, which report_plugin_host dlopens) with --icf=all and
--gc-sections. A configuration is at parity when every binary of both
builds has the same functions at the same sizes, allocated sections and dynamic symbols.

With `--partitions N` every configuration also gets `lto_partitions=N use_whole_program_vtables=false`: the link
line asks lld for N partitions of the regular-LTO module, which in-process lld makes itself and the graph makes
as partition edges. Whole-program devirtualization is off because in-process lld cannot partition a module with
branch funnels (it aborts; docs/design/partitions.md); CFI, on by default, still splits the LTO units.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

EXAMPLE_ROOT = Path(__file__).resolve().parent.parent / "examples" / "chromium_style"

# (name, GN args): the example defaults to an official build with CFI and whole-program vtables, symbol_level 0.
CONFIGURATIONS: tuple[tuple[str, str], ...] = (
    ("official, CFI, WPD", ""),
    ("not official", "is_official_build=false"),
    ("no CFI", "is_cfi=false"),
    ("no CFI, no WPD", "is_cfi=false use_whole_program_vtables=false"),
    ("symbol_level=1", "symbol_level=1"),
    ("symbol_level=2", "symbol_level=2"),
    ("symbol_level=1, split DWARF", "symbol_level=1 use_debug_fission=true"),
    ("symbol_level=2, split DWARF", "symbol_level=2 use_debug_fission=true"),
    ("clang/lld 22", 'clang_base_path="/usr/lib/llvm-22"'),
)


def _gn_thinlto(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gn_thinlto.cli", *args], capture_output=True, text=True)


def _verdict(lines: list[str], binary: str) -> str:
    """`gn-thinlto parity`'s verdict for one binary (its line without the name), or "" when it is absent."""
    return next((line.split(": ", 2)[2] for line in lines if line.startswith(f"{binary}: ")), "")


def run_configuration(out: Path, args: str) -> str:
    """Both builds of the example in OUT/{inproc,graph} with GN ARGS, and the parity verdict as one line."""
    printed = ""
    for name, extra in (("inproc", ["--in-process"]), ("graph", [])):
        proc = _gn_thinlto("example", "--root", str(EXAMPLE_ROOT), "--out", str(out / name), "--args", args, *extra)
        if proc.returncode != 0:
            return f"{name} build failed: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}"
        printed = proc.stdout
    links = next((line.strip() for line in printed.splitlines() if "link targets:" in line), "")
    proc = _gn_thinlto("parity", str(out / "inproc"), str(out / "graph"))
    lines = proc.stdout.splitlines()
    at_parity = sum(": at parity: " in line for line in lines)
    o0 = _verdict(lines, "exe.unstripped/matrix_tool_lto_o0")
    module = _verdict(lines, "lib.unstripped/libreport_plugin.so")
    verdict = "at parity" if proc.returncode == 0 else f"NOT at parity (exit {proc.returncode})"
    detail = [line for line in lines if ": NOT at parity: " in line][:3]
    return (f"{verdict}: {at_parity}/{len(lines)} binaries; --lto-O0 binary: {o0}; loadable module: {module}; "
            f"{links.removeprefix('gn-thinlto: ')}{_partitions(out / 'graph')}" + "".join(f"\n    {d}" for d in detail))


def _partitions(graph: Path) -> str:
    """How the graph build's links partitioned their regular-LTO modules (their lto/partitions.json), if any did."""
    records = [json.loads(p.read_text()) for p in sorted(graph.glob("gn-thinlto/*/lto/partitions.json"))]
    if not records:
        return ""
    split = collections.Counter(r["partitions"] for r in records)
    return "; partitions per link: " + ", ".join(f"{n} in {count}" for n, count in sorted(split.items()))


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench parity", description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/parity-matrix"), help="where the builds go")
    parser.add_argument("--only", action="append", default=[], help="run only configurations with this name")
    parser.add_argument("--partitions", type=int, default=0,
                        help="N > 1: every configuration with lto_partitions=N and whole-program devirtualization off")
    args = parser.parse_args(argv)
    if args.partitions == 1 or args.partitions < 0:
        parser.error("--partitions: a number of partitions above 1 (lld does not split for 1)")
    extra = f"lto_partitions={args.partitions} use_whole_program_vtables=false" if args.partitions else ""
    failed = 0
    for n, (name, gn_args) in enumerate(CONFIGURATIONS):
        if args.only and name not in args.only:
            continue
        keys = {a.split("=")[0] for a in gn_args.split()}
        gn_args = " ".join([*gn_args.split(), *(a for a in extra.split() if a.split("=")[0] not in keys)])
        line = run_configuration(args.out / f"c{n}", gn_args)
        failed += not line.startswith("at parity")
        print(f"{name} [{gn_args or 'defaults'}]: {line}", flush=True)
    return 1 if failed else 0
