"""`python -m bench proxy`: the local proxy against today's in-process client, side by side in one run.

1. Client CPU per action-cache hit: the same warm actions through `goma-ext run` in-process (GOMA_EXT_PROXY=off,
   the launcher ninja used before the proxy: `python -m goma_ext.remote.wrapper`) and through the thin client
   and the proxy (`python -S …/thin_client.py`); CPU of the client processes only (rusage of reaped children).
2. Clean builds of the example: (c) local graph; (d1) in-process remote, cold cache; (d2) in-process again from
   a fresh directory; then, on a fresh cluster (cold CAS and action cache again), (c2) the local graph build
   again with that cluster running idle on the same cores, (p1) through the proxy, cold; (p2) through the proxy
   from a fresh directory (all action-cache hits); c2 and p2 three times, interleaved, median reported. The
   all-hits wall is compared with c2, the local build beside the same idle cluster; per-action overheads (mean
   backend edge, d1 and p1) with c, as [remote]'s benchmark does.
3. The load test (bench.proxy_load) on that cluster, twice: with a thin-client process per action, then ([lean])
   through the step launcher and each build directory's step server, as a build runs remote backends now. The
   second gives the client and proxy CPU per action the goals and the scale model use.

Writes bench/results/proxy.json, including the measured costs the scale model (`bench scale-model`) reads.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import cluster_tool, graph_tool, prereqs, proxy_load, results, subjects
from bench.fsio import remove, scratch_dir
from bench.measure import progress, ratio
from bench.remote_bench import Row, one_build
from bench.subjects import thin_program
from bench.table import render
from bench.variants import Variant
from goma_ext.remote import proxy_protocol as wire

IN_PROCESS = {"GOMA_EXT_PROXY": "off"}
REPEAT = 3


def _median(rows: Sequence[Row]) -> Row:
    """The run with the median wall time."""
    return sorted(rows, key=lambda r: r.wall_s)[len(rows) // 2]


def _client_cpu(cmds: Sequence[tuple[list[str], Path]], env: Mapping[str, str]) -> tuple[float, float]:
    """(CPU ms, wall ms) per command, run one after another; CPU of the client processes alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    walls = []
    for cmd, cwd in cmds:
        t = time.monotonic()
        subprocess.run(cmd, cwd=cwd, env=dict(env), check=True, capture_output=True)
        walls.append(time.monotonic() - t)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return 1000 * cpu / len(cmds), 1000 * statistics.median(walls)


def hit_costs(work: Path, endpoint: str, env: Mapping[str, str], repeat: int) -> dict[str, float]:
    """Client CPU and wall per action-cache hit, in-process vs thin client + proxy (same actions, warm cache)."""
    program = thin_program.build(work / "hits")
    settings = ["--remote", endpoint, "--exec-root", ".."]
    thin = [sys.executable, "-S", str(proxy_load.THIN_CLIENT), *settings, "--"]
    old = [sys.executable, "-m", "goma_ext.remote.wrapper", *settings, "--"]
    for m in thin_program.MODULES:  # execute once, start the proxy, remember the compiler
        subprocess.run([*thin, *program.backend(m)], cwd=program.out, env=dict(env), check=True, capture_output=True)
    cmds = [m for _ in range(repeat) for m in thin_program.MODULES]
    old_cpu, old_wall = _client_cpu([([*old, *program.backend(m)], program.out) for m in cmds], {**env, **IN_PROCESS})
    new_cpu, new_wall = _client_cpu([([*thin, *program.backend(m)], program.out) for m in cmds], env)
    return {"in_process_cpu_ms": old_cpu, "in_process_wall_ms": old_wall, "proxy_cpu_ms": new_cpu,
            "proxy_wall_ms": new_wall, "hits": len(cmds)}


def _builds(cache: Path, salt: str, name: str, workers: int,
            keep: bool = False) -> tuple[list[Row], str, tuple[Path, str] | None]:
    """Rows c, d1, d2 on a cluster of their own, stopped after them unless KEEP (then also its state and endpoint)."""
    subject = subjects.SUBJECTS[name](cache)
    work = cache / "proxy" / name
    rows = [one_build(subject, Variant.GRAPH, work / "out_c", None, salt, "c")]
    state = cache / f"cluster-{salt}-a"
    endpoint = cluster_tool.start(state, workers)
    try:
        rows.append(one_build(subject, Variant.REMOTE, work / "out_d1", endpoint, salt, "d1", IN_PROCESS))
        rows.append(one_build(subject, Variant.REMOTE, work / "out_d2", endpoint, salt, "d2", IN_PROCESS))
    except BaseException:
        keep = False
        raise
    finally:
        if not keep:
            cluster_tool.stop(state)
            remove(state)
    progress("  in-process builds: done")
    return rows, subject.name, (state, endpoint) if keep else None


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench proxy", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer hits, a smaller load test, one cluster (the proxy rows' CAS is warm: their upload "
                        "figures are not a full run's)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "gn-thinlto-bench")
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--workers", type=int, default=4, help="workers of each cluster (both have as many)")
    p.add_argument("--subject", default="example", help="what the builds build: example, ninja, tiny or micro")
    p.add_argument("--hit-rounds", type=int, metavar="N",
                   help="rounds over the 5 modules of the client-CPU-per-hit comparison (default 20, --quick 4)")
    p.add_argument("--load-copies", type=int, metavar="N",
                   help="workspace copies of the thin-client load test (20 actions each; default 100, --quick 10); "
                        "the step-launcher load test runs as many actions from a tenth as many copies (at least one)")
    args = p.parse_args(argv)
    prereqs.ensure()
    ctx = results.context()
    command = "python -m bench proxy" + (" --quick" if args.quick else "") + (
        f" --subject {args.subject}" if args.subject != "example" else "") + (
        f" --hit-rounds {args.hit_rounds}" if args.hit_rounds else "") + (
        f" --load-copies {args.load_copies}" if args.load_copies else "")
    hit_rounds = args.hit_rounds or (4 if args.quick else 20)
    copies = args.load_copies or (10 if args.quick else 100)
    step_copies = max(1, copies // 10)
    print(f"machine: {ctx['machine'].one_line()}")
    missing = graph_tool.available() or cluster_tool.available()
    if missing:
        print(f"not measured: {missing}")
        results.write(args.results, "proxy", dict(ctx, missing=missing, command=command))
        return 0
    salt = f"bench-{time.time_ns()}"
    rows, subject_name, kept = _builds(args.cache, salt, args.subject, args.workers, keep=args.quick)
    if kept:  # --quick: the first cluster again, under a new salt (a cold action cache, a warm CAS)
        (state, endpoint), salt = kept, f"{salt}-p"
    else:
        state = args.cache / f"cluster-{salt}-b"  # fresh: cold CAS and action cache for the proxy rows
        endpoint = cluster_tool.start(state, args.workers)
    state_dir = tempfile.mkdtemp(prefix="gxb-")  # made here: the finally below removes it
    env = {**os.environ, wire.STATE_DIR_ENV: state_dir, "GOMA_EXT_CACHE_SALT": salt}  # with this cluster's token
    work = scratch_dir(args.cache, "proxy-bench-")
    try:
        subject = subjects.SUBJECTS[args.subject](args.cache)
        out = args.cache / "proxy" / args.subject
        # The cluster shares this machine's cores even when idle (BuildGrid polls PostgreSQL, workers poll it):
        # (c2) is the local build again with it running, the baseline its remote rows are compared with.
        proxy_env = {wire.STATE_DIR_ENV: state_dir}
        rows.append(one_build(subject, Variant.REMOTE, out / "out_p1", endpoint, salt, "p1", proxy_env))
        # c2 and p2 are short and sensitive to whatever else the machine does: interleaved, median of REPEAT.
        samples: dict[str, list[Row]] = {"c2": [], "p2": []}
        for _ in range(1 if args.quick else REPEAT):
            samples["c2"].append(one_build(subject, Variant.GRAPH, out / "out_c2", None, salt, "c2"))
            samples["p2"].append(one_build(subject, Variant.REMOTE, out / "out_p2", endpoint, salt, "p2", proxy_env))
        rows += [_median(samples["c2"]), _median(samples["p2"])]
        progress("  proxy builds: done")
        hits = hit_costs(work, endpoint, env, hit_rounds)
        progress("  hit costs: done")
        actions, digests = proxy_load.prepare(work / "load", copies)
        thin_load = proxy_load.run_load(actions, digests, endpoint, {**env, "GOMA_EXT_CACHE_SALT": f"{salt}-load"},
                                        50 if args.quick else 200)
        progress("  load test, thin clients: done")
        # as many actions from a tenth of the build directories (a build's step server serves many edges)
        actions, digests = proxy_load.prepare(work / "steps", step_copies, copies // step_copies)
        load = proxy_load.run_load(actions, digests, endpoint, {**env, "GOMA_EXT_CACHE_SALT": f"{salt}-steps"},
                                   50 if args.quick else 200, "steps")
        progress("  load test, step launchers: done")
    finally:
        proxy_load.stop_proxies(env)
        cluster_tool.stop(state)
        remove(state)
        remove(work)
        remove(Path(state_dir))
    by = {r.build: r for r in rows}
    c, c2, d1, d2, p1, p2 = (by[k] for k in ("c", "c2", "d1", "d2", "p1", "p2"))
    overhead_old, overhead_new = d1.mean_backend_ms - c.mean_backend_ms, p1.mean_backend_ms - c.mean_backend_ms
    goals = {
        "client_cpu_per_hit_proxy_vs_in_process": ratio(hits["proxy_cpu_ms"], hits["in_process_cpu_ms"]),
        "fresh_dir_all_hits_wall_vs_local": ratio(p2.wall_s, c2.wall_s),
        "fresh_dir_all_hits_wall_vs_local_without_cluster": ratio(p2.wall_s, c.wall_s),
        "fresh_dir_all_hits_wall_in_process_vs_local": ratio(d2.wall_s, c.wall_s),
        "remote_overhead_proxy_vs_in_process": ratio(overhead_new, overhead_old),
    }
    costs = {
        "client_cpu_ms_per_hit": hits["proxy_cpu_ms"],
        "client_cpu_ms_per_action": load.client_cpu_ms,
        "step_server_cpu_ms_per_action": 1000 * load.step_server_cpu_s / load.actions,
        "proxy_cpu_ms_per_action": load.per_action_ms("proxy"),
        "thin_client_cpu_ms_per_action": thin_load.client_cpu_ms,
        "thin_proxy_cpu_ms_per_action": thin_load.per_action_ms("proxy"),
        "server_round_trip_ms_p50": hits["proxy_wall_ms"],
        "server_cpu_ms_per_action": load.per_action_ms("buildgrid") + load.per_action_ms("postgres"),
        "remote_overhead_ms_per_action": overhead_new,
    }
    print(render(["build", "wall s", "actions", "remote", "cache hits", "fallbacks", "mean backend ms"],
                 [[f"{subject_name} {r.build}", r.wall_s, r.actions, r.remote_executions, r.cache_hits,
                   r.local_fallbacks, r.mean_backend_ms] for r in rows]))
    print(render(["client", "CPU ms / hit", "wall ms / hit"],
                 [["in-process", hits["in_process_cpu_ms"], hits["in_process_wall_ms"]],
                  ["thin + proxy", hits["proxy_cpu_ms"], hits["proxy_wall_ms"]]]))
    print(proxy_load.describe(thin_load))
    print(proxy_load.describe(load))
    print(render(["goal", "value"], [[k, v] for k, v in goals.items()]))
    data: dict[str, Any] = dict(ctx, command=command, rows=rows, hits=hits, load=asdict(load),
                                thin_load=asdict(thin_load),
                                wall_samples={k: [r.wall_s for r in v] for k, v in samples.items()},
                                load_throughput=load.throughput, goals=goals, workers=args.workers,
                                source=graph_tool.source_state(), **costs)
    print(f"results: {results.write(args.results, 'proxy', data)}")
    return 0
