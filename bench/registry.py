"""The one list of benchmarks and of the results they record: `python -m bench NAME`, `bench all` and `bench report`
all read it (before, each kept a list of its own, and they drifted).

A *benchmark* is a command, `python -m bench NAME`, whose module has `main(argv) -> int`. A *run* is one results
file, `bench/results/NAME.json`: a benchmark with arguments. `bench all` runs the runs that have arguments for its
mode, in this order (counts and per-edge costs first, the timing-sensitive side-by-side builds last, but the
1,000 × 1,000 graph, the longest); `bench report` renders each run that has a renderer into the
`<!-- bench:NAME -->` block of docs/benchmarks.md. Runs outside `bench all` are recorded by their own command (in
docs/benchmarks.md next to their table): they take hours (abseil, Chromium's sources, the parity matrix) or need
what `all` does not set up.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Benchmark:
    name: str  # python -m bench NAME
    module: str  # has main(argv) -> int
    own_options: bool = False  # takes no --cache/--results: `bench all` keeps its printed table as the results


@dataclass(frozen=True)
class Run:
    """RESULTS/NAME.json, written by BENCHMARK; QUICK and FULL are its arguments in `bench all --quick` and `bench all`
    (None: not in that mode), RENDERS_AS the report's renderer for its block (None: no block of its own)."""

    name: str
    benchmark: str
    quick: tuple[str, ...] | None = None
    full: tuple[str, ...] | None = None
    renders_as: str | None = None


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("index", "bench.index_bench", own_options=True),
    Benchmark("scale", "bench.scale_bench"),
    Benchmark("builds", "bench.builds_bench"),
    Benchmark("sharing", "bench.sharing_bench"),
    Benchmark("remote", "bench.remote_bench"),
    Benchmark("cache", "bench.cache_bench"),
    Benchmark("dtlto", "bench.dtlto_bench"),
    Benchmark("scale-model", "bench.scale_model"),
    Benchmark("partition-edit", "bench.partition_edit_bench"),
    Benchmark("proxy", "bench.proxy_bench"),
    Benchmark("proxy-shards", "bench.shard_bench"),
    Benchmark("grpc-calls", "bench.grpc_calls"),
    Benchmark("shaped", "bench.shaped_bench"),
    Benchmark("isolation", "bench.isolation_bench"),
    Benchmark("regen", "bench.regen_bench"),
    Benchmark("parity", "bench.parity_matrix"),
    Benchmark("hermetic", "bench.hermetic_bench"),
    Benchmark("step", "bench.step_bench"),
    Benchmark("scheduling", "bench.scheduling_bench"),
    Benchmark("all", "bench.all_bench"),
    Benchmark("report", "bench.report"),
)

RUNS: tuple[Run, ...] = (
    Run("index", "index", ("--sizes", "200", "--repeat", "10"), ("--sizes", "200,2000", "--repeat", "30"), "index"),
    Run("sharing", "sharing", ("--quick",), (), "sharing"),
    Run("remote", "remote", ("--subjects", "tiny"), (), "remote"),
    Run("proxy", "proxy", ("--quick", "--subject", "tiny"), (), "proxy"),
    Run("isolation", "isolation", ("--quick",), (), "isolation"),
    Run("dtlto", "dtlto", ("--project", "libdeflate", "--repeat", "1"), (), "dtlto"),
    Run("builds", "builds", ("--subjects", "tiny", "--variants", "abcd", "--repeat", "1"), ("--variants", "abcd"),
        "builds"),
    Run("scale", "scale", ("--quick", "--chromium", "4000"), ("--sizes", "100:1000", "--chromium", "40000"), "scale"),
    Run("regen", "regen", ("--quick",), (), "regen"),
    Run("scale-large", "scale", None, ("--sizes", "1000:1000", "--mix", "", "--name", "scale-large"), "scale"),
    # by their own commands (docs/benchmarks.md shows each one's)
    Run("builds-quiet", "builds"),  # a quiet re-run: in the goals table only
    Run("builds-chromium", "builds", renders_as="builds"),
    Run("builds-abseil", "builds", renders_as="builds"),
    Run("builds-abseil-partitions", "builds", renders_as="builds"),
    Run("builds-abseil-partitions-auto", "builds", renders_as="builds"),
    Run("partition-edit", "partition-edit"),
    Run("proxy-shards", "proxy-shards"),
    Run("shaped", "shaped"),
    Run("scale-model-partitions-off", "scale-model"),
    Run("scale-model-partitions-8", "scale-model"),
    Run("cache", "cache", renders_as="cache"),
    Run("step", "step", renders_as="step"),
    Run("scheduling", "scheduling", renders_as="scheduling"),
    Run("scale-model", "scale-model"),
    Run("hermetic", "hermetic"),
    Run("scale-model-shards-32", "scale-model"),  # [scale]: these five in the goals table only
    Run("scale-model-shards-64", "scale-model"),
    Run("proxy-shards-16", "proxy-shards"),  # the shards `auto` gives a 32-core machine
    Run("shaped-compression", "shaped"),
    Run("shaped-abseil-compression", "shaped"),
)


def benchmark(name: str) -> Benchmark:
    return next(b for b in BENCHMARKS if b.name == name)


def in_all(quick: bool) -> tuple[Run, ...]:
    """The runs of `bench all` (--quick: QUICK), in order."""
    return tuple(r for r in RUNS if (r.quick if quick else r.full) is not None)
