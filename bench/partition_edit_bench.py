"""`python -m bench partition-edit`: [partition] a body edit inside the regular-LTO module, on the abseil build
directories of the builds benchmark (run `python -m bench builds --subjects abseil --variants bcf` first; it leaves
them in CACHE/builds/abseil/out_{b,c,f}).

The builds benchmark's body edit is in `str_cat.cc`, whose functions go to ThinLTO modules: the regular-LTO
modules do not change, and no partition edge runs. This edit changes a test body in `fixed_array_test.cc`, which
clang writes whole as a regular-LTO module (its tests sit in an anonymous namespace, so it has no module ID):
`absl_container_tests`' regular-LTO module changes. Each variant's build directory is built after the edit, then
after a second edit (a new statement in the same place), in turn: (b) in-process ThinLTO with lld's cache, which
caches ThinLTO backends only and compiles the regular-LTO module again in every link; (c) the graph with partition
edges (`lto_partitions` as the builds run configured it); (f) the graph without them. Per build: wall and CPU time,
thin-link edge seconds, and the partition edges that compiled (cache misses) and that hit the backend cache.
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import prereqs, results, subjects, variants
from bench.builds_bench import ninja
from bench.measure import BenchError, progress, ratio
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render
from bench.variants import Variant
from gn_thinlto.analysis import build_log
from gn_thinlto.steps.backend_log import CacheEvent
from gn_thinlto.steps.thinlink_paths import PARTITION_DIR

SOURCE = "absl/container/fixed_array_test.cc"  # a whole regular-LTO module of absl_container_tests
ANCHOR = "TEST(FixedArrayTest, SmallObjects) {"
CHOSEN = (Variant.LLD_CACHE, Variant.GRAPH, Variant.NO_PARTITIONS)


@dataclass(frozen=True)
class EditBuild:
    variant: str
    sample: int
    wall_s: float
    cpu_s: float
    thin_link_s: float | None
    partition_misses: int | None
    partition_hits: int | None
    backend_misses: int | None


def edit(root: Path) -> None:
    """A new statement at the top of ANCHOR's body in SOURCE (the previous one removed)."""
    path = root / SOURCE
    text = re.sub(r"\n *\{ volatile int gn_thinlto_bench_edit = \d+; \(void\)gn_thinlto_bench_edit; \}", "",
                  path.read_text())
    if ANCHOR not in text:
        raise BenchError(f"{path}: {ANCHOR!r} not found for the edit")
    statement = subjects.BODY_EDIT.format(n=time.time_ns() % 1_000_000_007)
    path.write_text(text.replace(ANCHOR, f"{ANCHOR}\n  {statement}", 1))


def partition_events(out_dir: Path, since: variants.Counters) -> tuple[int, int, int]:
    """(partition misses, partition hits, other misses) the backend log recorded since SINCE."""
    with (out_dir / variants.GRAPH_BACKEND_LOG).open("rb") as f:
        f.seek(since.backend_log_bytes)
        verdicts = build_log.cache_verdicts(f.read().decode())
    partition = [event for output, event in verdicts.items() if f"/{PARTITION_DIR}/" in output]
    other = sum(event == CacheEvent.MISS and f"/{PARTITION_DIR}/" not in output for output, event in verdicts.items())
    return partition.count(CacheEvent.MISS), partition.count(CacheEvent.HIT), other


def measured(variant: Variant, out_dir: Path, sample: int) -> EditBuild:
    before = variants.counters(out_dir)
    log_line = variants.ninja_log_lines(out_dir)
    s = ninja(out_dir)
    if variant is Variant.LLD_CACHE:
        return EditBuild(variant.value, sample, s.wall_s, s.cpu_s, None, None, None, None)
    thin, _ = variants.thin_link_times(out_dir, log_line)
    misses, hits, other = partition_events(out_dir, before)
    return EditBuild(variant.value, sample, s.wall_s, s.cpu_s, sum(thin.values()), misses, hits, other)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench partition-edit", description=__doc__.splitlines()[0])
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--repeat", type=int, default=2, help="edits, each built by every variant (default 2)")
    args = p.parse_args(argv)
    prereqs.ensure()
    subject = subjects.SUBJECTS["abseil"](args.cache)
    outs = {v: args.cache / "builds" / "abseil" / f"out_{v.value}" for v in CHOSEN}
    missing = [str(o) for o in outs.values() if not (o / "build.ninja").is_file()]
    if missing:
        raise BenchError(f"{', '.join(missing)}: not built; run python -m bench builds --subjects abseil "
                         "--variants bcf first")
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    for out in outs.values():  # up to date first, so that each build below is the edit's alone
        ninja(out)
    builds: list[EditBuild] = []
    for k in range(max(1, args.repeat)):
        edit(subject.root)
        for v, out in outs.items():
            b = measured(v, out, k)
            builds.append(b)
            progress(f"  edit {k + 1} ({v.value}): {b.wall_s:.1f}s"
                     + (f", partitions {b.partition_misses} compiled, {b.partition_hits} hits"
                        if b.partition_misses is not None else ""))
    checks = [f"{v.title} after the edits: {subjects.check(subject, out)}" for v, out in outs.items()]
    print(render(["variant", "edit", "wall s", "CPU s", "thin-link s", "partitions compiled", "partition hits",
                  "other backends compiled"],
                 [[f"({b.variant})", b.sample + 1, b.wall_s, b.cpu_s, b.thin_link_s, b.partition_misses,
                   b.partition_hits, b.backend_misses] for b in builds]))
    by = {(b.variant, b.sample): b for b in builds}
    rows = [[k + 1, ratio(by[("c", k)].wall_s, by[("b", k)].wall_s), ratio(by[("c", k)].wall_s, by[("f", k)].wall_s)]
            for k in range(max(1, args.repeat))]
    print(render(["edit", "c / b wall", "c / f wall"], rows))
    print("\n".join(checks))
    path = results.write(args.results, "partition-edit", dict(
        ctx, command="python -m bench partition-edit" + (f" --repeat {args.repeat}" if args.repeat != 2 else ""),
        builds=builds, ratios=[dict(zip(("edit", "c_vs_b_wall", "c_vs_f_wall"), r)) for r in rows], checks=checks))
    print(f"results: {path}")
    return 0
