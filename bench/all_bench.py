"""`python -m bench all [--quick]`: every benchmark in one run, then the report (docs/benchmarks.md tables, plots).

--quick runs each at a small size (under 10 minutes on 2 cores); without it the sizes of docs/benchmarks.md
(graph scale up to 1,000 × 1,000, ninja's sources, remote cluster), which takes about an hour on 2 cores.
Order: counts and per-edge costs first, the timing-sensitive side-by-side builds last.
"""

from __future__ import annotations

import argparse
import importlib
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench import results
from bench.fsio import REPO
from bench.ninja_sdist import DEFAULT_CACHE

# (benchmark, extra arguments in --quick mode)
PLAN: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("index", ("--sizes", "200", "--repeat", "10")),
    ("scale", ("--quick",)),
    ("sharing", ("--quick",)),
    ("remote", ("--quick",)),
    ("builds", ("--quick", "--variants", "abcd")),
)
FULL_EXTRA = {"builds": ("--variants", "abcd"), "index": ("--sizes", "200,2000", "--repeat", "30")}
OWN_CACHE_ARGS = {"index"}  # benchmarks with their own options (no --cache/--results)


def run_captured(name: str, extra: Sequence[str], results_dir: Path) -> int:
    """Run a benchmark that writes no JSON of its own; keep its printed table as RESULTS/NAME.json."""
    cmd = [sys.executable, "-m", "bench", name, *extra]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    print(proc.stdout + proc.stderr, end="", flush=True)
    results.write(results_dir, name, dict(results.context(), output=proc.stdout, returncode=proc.returncode,
                                          command=shlex.join(["python", *cmd[1:]])))
    return proc.returncode


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench all", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes, under 10 minutes")
    p.add_argument("--only", help="comma-separated subset of: " + ", ".join(n for n, _ in PLAN))
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--no-report", action="store_true", help="do not rewrite docs/benchmarks.md and the plots")
    args = p.parse_args(argv)
    from bench.__main__ import BENCHMARKS

    chosen = set(args.only.split(",")) if args.only else {n for n, _ in PLAN}
    failed = []
    for name, quick_extra in PLAN:
        if name not in chosen:
            continue
        extra = list(quick_extra if args.quick else FULL_EXTRA.get(name, ()))
        if name not in OWN_CACHE_ARGS:
            extra += ["--cache", str(args.cache), "--results", str(args.results)]
        print(f"\n=== python -m bench {name} {' '.join(extra)}", flush=True)
        start = time.monotonic()
        if name in OWN_CACHE_ARGS:
            code = run_captured(name, extra, args.results)
        else:
            code = int(importlib.import_module(BENCHMARKS[name]).main(extra))
        print(f"=== {name}: exit {code} after {time.monotonic() - start:.0f} s", flush=True)
        if code:
            failed.append(name)
    if not args.no_report:
        from bench import report

        report.main(["--results", str(args.results)])
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0
