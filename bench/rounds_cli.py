"""The command line shared by the benchmarks measured in rounds on the example (isolation, step): `--quick` (one
round), `--cache`, `--results`; the prerequisites checked and the machine described before anything runs."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import prereqs, results
from bench.subjects.ninja_sdist import DEFAULT_CACHE


def parser(name: str, doc: str) -> argparse.ArgumentParser:
    """`python -m bench NAME`'s parser with --cache and --results (DOC's first line describes it)."""
    p = argparse.ArgumentParser(prog=f"python -m bench {name}", description=doc.splitlines()[0])
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    return p


def ready() -> dict[str, Any]:
    """The prerequisites checked and the machine described: the results context."""
    prereqs.ensure()
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    return ctx


def start(name: str, doc: str, argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, Any], str]:
    """(arguments, results context, the command line as recorded) of `python -m bench NAME` with --quick."""
    p = parser(name, doc)
    p.add_argument("--quick", action="store_true", help="one round instead of three")
    args = p.parse_args(argv)
    return args, ready(), f"python -m bench {name}" + (" --quick" if args.quick else "")


def not_measured(args: argparse.Namespace, name: str, ctx: dict[str, Any], missing: str, command: str) -> int:
    """Record that NAME could not be measured here, and why."""
    print(f"not measured: {missing}")
    results.write(args.results, name, dict(ctx, rows=[], missing=missing, command=command))
    return 0
