"""`python -m bench all [--quick]`: the registry's benchmarks in one run, then the report (docs/benchmarks.md, plots).

The runs and their arguments are bench/registry.py's RUNS (those with arguments for the mode). --quick runs each
at a small size (builds and remote on a 2 × 4 synthetic workspace; under 10 minutes on 2 cores); without it the
sizes of docs/benchmarks.md (graph scale up to 1,000 × 1,000, the example and ninja's sources, remote cluster),
which takes about 40 minutes on 2 cores. The other runs (abseil, Chromium's sources, the parity matrix, …) have
their own commands.
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

from bench import prereqs, registry, results
from bench.fsio import REPO
from bench.subjects.ninja_sdist import DEFAULT_CACHE


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
    p.add_argument("--only", help="comma-separated subset of: " + ", ".join(r.name for r in registry.in_all(False)))
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--no-report", action="store_true", help="do not rewrite docs/benchmarks.md and the plots")
    args = p.parse_args(argv)
    prereqs.ensure()
    runs = registry.in_all(args.quick)
    chosen = set(args.only.split(",")) if args.only else {r.name for r in runs}
    unknown = sorted(chosen - {r.name for r in runs})
    if unknown:
        p.error(f"--only: {', '.join(unknown)} not in `bench all{' --quick' if args.quick else ''}`")
    failed = []
    for run in runs:
        if run.name not in chosen:
            continue
        step, bench = run.name, registry.benchmark(run.benchmark)
        extra = list((run.quick if args.quick else run.full) or ())
        if not bench.own_options:
            extra += ["--cache", str(args.cache), "--results", str(args.results)]
        print(f"\n=== {step}: python -m bench {bench.name} {' '.join(extra)}", flush=True)
        start = time.monotonic()
        try:
            if bench.own_options:
                code = run_captured(bench.name, extra, args.results)
            else:
                code = int(importlib.import_module(bench.module).main(extra))
        except Exception as e:  # one failed benchmark must not lose the others' numbers
            print(f"=== {step}: {type(e).__name__}: {e}", flush=True)
            code = 1
        print(f"=== {step}: exit {code} after {time.monotonic() - start:.0f} s", flush=True)
        if code:
            failed.append(step)
    if not args.no_report:
        from bench import report

        report.main(["--results", str(args.results)])
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0
