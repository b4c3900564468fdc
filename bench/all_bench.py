"""`python -m bench all [--quick]`: every benchmark in one run, then the report (docs/benchmarks.md tables, plots).

--quick runs each at a small size (builds and remote on a 2 × 4 synthetic workspace; under 10 minutes on 2 cores);
without it the sizes of docs/benchmarks.md (graph scale up to 1,000 × 1,000, the example and ninja's sources,
remote cluster), which takes about 40 minutes on 2 cores.
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

from bench import prereqs, results
from bench.fsio import REPO
from bench.ninja_sdist import DEFAULT_CACHE

# (step, benchmark, arguments with --quick (None: skipped), arguments in a full run); timing-sensitive last but
# the 1,000 x 1,000 graph, the longest step.
PLAN: tuple[tuple[str, str, tuple[str, ...] | None, tuple[str, ...]], ...] = (
    ("index", "index", ("--sizes", "200", "--repeat", "10"), ("--sizes", "200,2000", "--repeat", "30")),
    ("sharing", "sharing", ("--quick",), ()),
    ("remote", "remote", ("--subjects", "tiny"), ()),
    ("proxy", "proxy", ("--quick", "--subject", "tiny"), ()),
    ("isolation", "isolation", ("--quick",), ()),
    ("dtlto", "dtlto", ("--project", "libdeflate", "--repeat", "1"), ()),
    ("builds", "builds", ("--subjects", "tiny", "--variants", "abcd", "--repeat", "1"),
     ("--variants", "abcd")),
    ("scale", "scale", ("--quick", "--chromium", "4000"), ("--sizes", "100:1000", "--chromium", "40000")),
    ("regen", "regen", ("--quick",), ()),
    ("scale-large", "scale", None, ("--sizes", "1000:1000", "--mix", "", "--name", "scale-large")),
)
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
    p.add_argument("--only", help="comma-separated subset of: " + ", ".join(step for step, *_ in PLAN))
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--no-report", action="store_true", help="do not rewrite docs/benchmarks.md and the plots")
    args = p.parse_args(argv)
    prereqs.ensure()
    from bench.__main__ import BENCHMARKS

    chosen = set(args.only.split(",")) if args.only else {step for step, *_ in PLAN}
    failed = []
    for step, name, quick_args, full_args in PLAN:
        if step not in chosen or (args.quick and quick_args is None):
            continue
        extra = list(quick_args if args.quick and quick_args is not None else full_args)
        if name not in OWN_CACHE_ARGS:
            extra += ["--cache", str(args.cache), "--results", str(args.results)]
        print(f"\n=== {step}: python -m bench {name} {' '.join(extra)}", flush=True)
        start = time.monotonic()
        try:
            if name in OWN_CACHE_ARGS:
                code = run_captured(name, extra, args.results)
            else:
                code = int(importlib.import_module(BENCHMARKS[name]).main(extra))
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
