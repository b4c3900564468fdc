"""`python -m bench hermetic`: the compiler travels as inputs; what that costs, side by side in one run.

On a new local cluster (cold CAS and action cache), the example is built: (c) locally; (h1) remotely, the first
build, which uploads the toolchain (clang and its libraries, ~260 MB); (h2) remotely from another fresh directory
with a new cache salt, so every backend executes again but the toolchain is in the CAS already (FindMissingBlobs
says so: nothing of it is uploaded); (h3) remotely from a third fresh directory with h1's salt: every backend is
an action-cache hit. Then the toolchain digest cost per action: the first computation (ELF closure + SHA-256 of
every file), and each later one from the proxy's memory and from the build directory's file.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from bench import cluster_tool, graph_tool, prereqs, results, subjects
from bench.fsio import remove
from bench.measure import progress, ratio
from bench.remote_bench import Row, one_build
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render
from bench.variants import Variant

COMPILER = Path("/usr/lib/llvm-19/bin/clang")
REPEAT = 2000


def digest_costs(work: Path) -> dict[str, float]:
    """ms per ToolchainCache.get: the first (cold), then from memory, then from the persisted file."""
    from goma_ext.remote.config import DEFAULT_BASE_SYSTEM
    from goma_ext.remote.toolchain import ToolchainCache

    persist = work / "toolchains.json"
    remove(persist)
    cache = ToolchainCache(persist)
    t = time.perf_counter()
    first = cache.get(COMPILER, "clang++", DEFAULT_BASE_SYSTEM)
    cold = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(REPEAT):
        cache.get(COMPILER, "clang++", DEFAULT_BASE_SYSTEM)
    memory = (time.perf_counter() - t) / REPEAT
    t = time.perf_counter()
    for _ in range(REPEAT // 10):
        if ToolchainCache(persist).get(COMPILER, "clang++", DEFAULT_BASE_SYSTEM) != first:
            raise AssertionError("the persisted toolchain differs from the computed one")
    from_file = (time.perf_counter() - t) / (REPEAT // 10)
    return {"toolchain_bytes": first.tree.file_bytes, "first_ms": cold * 1e3, "memory_ms": memory * 1e3,
            "file_ms": from_file * 1e3}


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench hermetic", description=__doc__.splitlines()[0])
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    prereqs.ensure()
    ctx = results.context()
    command = "python -m bench hermetic"
    print(f"machine: {ctx['machine'].one_line()}")
    missing = graph_tool.available() or cluster_tool.available()
    if missing:
        print(f"not measured: {missing}")
        results.write(args.results, "hermetic", dict(ctx, rows=[], missing=missing, command=command))
        return 0
    stamp = time.time_ns()
    state = args.cache / f"cluster-hermetic-{stamp}"
    work = args.cache / "hermetic"
    work.mkdir(parents=True, exist_ok=True)
    costs = digest_costs(work)
    endpoint = cluster_tool.start(state)
    subject = subjects.SUBJECTS["example"](args.cache)
    rows: list[Row] = []
    try:
        rows.append(one_build(subject, Variant.GRAPH, work / "out_c", None, f"a-{stamp}", "c"))
        progress("  local build: done")
        for tag, salt in (("h1", f"a-{stamp}"), ("h2", f"b-{stamp}"), ("h3", f"a-{stamp}")):
            rows.append(one_build(subject, Variant.REMOTE, work / f"out_{tag}", endpoint, salt, tag))
            progress(f"  {tag}: done")
    finally:
        cluster_tool.stop(state)
        remove(state)
    print(render(["build", "wall s", "actions", "remote", "cache hits", "fallbacks", "uploaded B", "inputs B"],
                 [[r.build, r.wall_s, r.actions, r.remote_executions, r.cache_hits, r.local_fallbacks,
                   r.bytes_uploaded, r.input_bytes] for r in rows]))
    by = {r.build: r for r in rows}
    summary = {
        "first_uploaded_bytes": by["h1"].bytes_uploaded, "second_uploaded_bytes": by["h2"].bytes_uploaded,
        "second_vs_first_uploaded": ratio(by["h2"].bytes_uploaded, by["h1"].bytes_uploaded),
        "second_vs_first_wall": ratio(by["h2"].wall_s, by["h1"].wall_s),
        "fresh_dir_hit_rate": ratio(by["h3"].cache_hits, by["h3"].actions),
        "fresh_dir_vs_local_wall": ratio(by["h3"].wall_s, by["c"].wall_s),
        **costs,
    }
    print(render(["measure", "value"], [[k, v] for k, v in summary.items()]))
    path = results.write(args.results, "hermetic", dict(ctx, rows=rows, summary=summary, command=command,
                                                         source=graph_tool.source_state()))
    print(f"results: {path}")
    return 0
