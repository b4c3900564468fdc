"""`python -m bench scheduling`: does a ninja with critical-path scheduling (1.12 or later; the PyPI `ninja`
package) shorten clean builds against Debian 12's ninja 1.11.1, side by side in one run ([lean], goal 6)?

Per subject (the example; ninja's sources with --subjects example,ninja) and variant ((a) in-process ThinLTO,
(c) the graph), ROUNDS clean builds with each ninja, the two ninjas interleaved: a new build directory each
time, so neither ninja has a .ninja_log from an earlier build (ninja 1.12+ then weighs every edge alike and
schedules the longest chain of edges first). Reported: the median wall time, and for (c) the critical path
(`gn-thinlto report --build`): its length and how long its edges waited for a free slot, the part a
scheduler can shorten. Each build's binaries pass the subject's own checks.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import results, rounds_cli, subjects, variants
from bench.fsio import remove
from bench.measure import BenchError, progress, run
from bench.table import render
from bench.variants import Variant

PYPI_NINJA = "ninja==1.13.2"  # critical-path scheduling landed in 1.12.0
DEBIAN_NINJA = "/usr/bin/ninja"
ROUNDS = 3


@dataclass(frozen=True)
class Row:
    subject: str
    variant: str
    ninja: str
    wall_s: float  # median
    walls: tuple[float, ...]
    critical_path_s: float | None  # (c): median length of the critical path (its edges and their waits)
    waited_s: float | None  # (c): median time its edges waited for a slot


def pypi_ninja(cache: Path) -> str:
    """The PyPI ninja binary, installed into CACHE once."""
    target = cache / "ninja-pypi"
    binary = target / "bin" / "ninja"  # the wheel's executable itself (a data script), not a Python wrapper
    if not binary.exists():
        run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), PYPI_NINJA])
    return str(binary)


def version(ninja: str) -> str:
    return subprocess.run([ninja, "--version"], capture_output=True, text=True, check=True).stdout.strip()


def critical_path(out: Path) -> tuple[float, float]:
    proc = run([sys.executable, "-m", "gn_thinlto.cli", "report", str(out), "--build", "--json"])
    report = json.loads(proc.output)
    path = report["critical_path"]
    if not path:
        return 0.0, 0.0
    start = path[0]["start_ms"] - path[0]["waited_ms"]
    return (path[-1]["end_ms"] - start) / 1000, sum(s["waited_ms"] for s in path) / 1000


def main(argv: Sequence[str]) -> int:
    p = rounds_cli.parser("scheduling", __doc__ or "")
    p.add_argument("--subjects", default="example", help="comma-separated: example, ninja")
    p.add_argument("--variants", default="ac", help="letters of the variants: a (in-process), c (graph)")
    p.add_argument("--repeat", type=int, default=ROUNDS)
    args = p.parse_args(argv)
    ctx = rounds_cli.ready()
    ninjas = {version(DEBIAN_NINJA): DEBIAN_NINJA, version(pypi_ninja(args.cache)): pypi_ninja(args.cache)}
    if len(ninjas) != 2:
        raise BenchError(f"the two ninjas are one version: {sorted(ninjas)}")
    rows, checks = [], []
    for name in args.subjects.split(","):
        subject = subjects.SUBJECTS[name](args.cache)
        for letter in args.variants:
            variant = Variant(letter)
            walls: dict[str, list[float]] = {n: [] for n in ninjas}
            paths: dict[str, list[tuple[float, float]]] = {n: [] for n in ninjas}
            for rep in range(args.repeat):
                order = list(ninjas) if rep % 2 == 0 else list(ninjas)[::-1]
                for ver in order:
                    out = args.cache / "scheduling" / name / f"out_{letter}"
                    remove(out)
                    variants.configure(variant, out, subject.root, subject.gn_args)
                    walls[ver].append(run([ninjas[ver], "-C", str(out)]).wall_s)
                    if variant is Variant.GRAPH:
                        paths[ver].append(critical_path(out))
                    checks.append(f"{name} {variant.title} ninja {ver}: {subjects.check(subject, out)}")
                    progress(f"  {name} {variant.title} ninja {ver}: {walls[ver][-1]:.1f}s")
            for ver in ninjas:
                cp = statistics.median(c for c, _ in paths[ver]) if paths[ver] else None
                waited = statistics.median(w for _, w in paths[ver]) if paths[ver] else None
                rows.append(Row(name, variant.title, ver, statistics.median(walls[ver]), tuple(walls[ver]), cp,
                                waited))
    header = ["subject", "variant", "ninja", "clean wall s (median)", "walls", "critical path s", "of which waiting"]
    print(render(header, [[r.subject, r.variant, r.ninja, r.wall_s, ", ".join(f"{w:.1f}" for w in r.walls),
                           r.critical_path_s, r.waited_s] for r in rows]))
    print("\n".join(sorted(set(checks))))
    command = "python -m bench scheduling" + ("" if args.subjects == "example" else f" --subjects {args.subjects}") + \
        ("" if args.variants == "ac" else f" --variants {args.variants}") + \
        ("" if args.repeat == ROUNDS else f" --repeat {args.repeat}")
    path = results.write(args.results, "scheduling", dict(ctx, rows=rows, checks=sorted(set(checks)),
                                                          command=command))
    print(f"results: {path}")
    return 0
