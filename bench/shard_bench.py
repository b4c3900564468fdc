"""`python -m bench proxy-shards`: the client side's CPU per remote action with one proxy and with several shards,
side by side in one run on one cluster, on two mixes ([scale]).

- `hits`: the load test's shape (bench.proxy_load): copies of a 5-module program whose actions are shared between
  copies, so nearly every action is an action-cache hit or joins one in flight (what a fresh build directory or a
  second build sees).
- `clean`: every copy's actions under a cache salt of their own, so every action is executed remotely (uploads,
  Execute, the outputs' download), and each with a command line of its own (an inert flag naming its copy), so they
  spread over the shards as a build's distinct backends do: a clean build's mix, with as many clients as the cluster
  runs at once
  (--clean-clients), as on a cluster sized to the build: no action waits long in the queue.
- `clean-queued`: the same with --clients at once: most wait in the server's queue for many seconds, each on its
  Execute stream (what a build with -j far above the cluster's slots asks of the proxy).

Each mix runs through the step launchers and each copy's step server, as a build runs remote backends, with 1 proxy
and with SHARDS proxies, one after the other on the same cluster. Before each measured run, rounds of 20 actions warm
the proxies up until every shard the run uses has served one (each connects and hashes the toolchain once in its
life). Printed per run: CPU per action of all
proxies together, of the busiest shard (what bounds a build, as the shards run in parallel), of the step servers and
of the whole client side. The scale
model (`bench scale-model`) reads the result, RESULTS/proxy-shards.json.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import cluster_tool, prereqs, proxy_load, results
from bench.fsio import remove, scratch_dir
from bench.measure import progress
from bench.table import render
from goma_ext.remote import proxy_protocol as wire

MIXES = ("hits", "clean", "clean-queued")
NAME = "proxy-shards"


IDLE_S = 5.0  # idle seconds measured before each run: the proxies' and step servers' background


def _row(r: proxy_load.LoadResult) -> list[Any]:
    return [r.mix, r.shards, r.actions, ", ".join(f"{k} {v}" for k, v in sorted(r.modes.items())), r.lost, r.wrong,
            round(r.wall_s, 1), round(r.per_action_ms("proxy"), 3), round(r.busiest_shard_ms(), 3),
            round(1000 * r.step_server_cpu_s / r.actions, 3), round(r.client_cpu_ms, 3),
            round(1000 * sum(r.idle_shard_cpu_per_s.values()), 2), round(1000 * r.idle_step_server_cpu_per_s, 2),
            round(r.net_busiest_shard_ms(), 3), round(r.net_client_ms(), 3)]


def costs_of(r: proxy_load.LoadResult) -> dict[str, float]:
    """The per-action costs the scale model reads, in ms: with the background the run's idle processes spent over
    its wall time, and without it (`net_`: what each further action costs; a build of 40,000 actions spreads the
    background thin)."""
    return {"proxy_cpu_ms_per_action": round(r.per_action_ms("proxy"), 4),
            "busiest_shard_cpu_ms_per_action": round(r.busiest_shard_ms(), 4),
            "step_server_cpu_ms_per_action": round(1000 * r.step_server_cpu_s / r.actions, 4),
            "client_cpu_ms_per_action": round(r.client_cpu_ms, 4), "shards": r.shards,
            "net_proxy_cpu_ms_per_action": round(r.net_proxy_ms(), 4),
            "net_busiest_shard_cpu_ms_per_action": round(r.net_busiest_shard_ms(), 4),
            "net_step_server_cpu_ms_per_action": round(r.net_step_server_ms(), 4),
            "net_client_cpu_ms_per_action": round(r.net_client_ms(), 4),
            "idle_proxies_cpu_ms_per_s": round(1000 * sum(r.idle_shard_cpu_per_s.values()), 3),
            "idle_step_servers_cpu_ms_per_s": round(1000 * r.idle_step_server_cpu_per_s, 3)}


WARM_ROUNDS = 8  # at most, of 20 actions each, until every shard has served one


def _warm_up(work: Path, endpoint: str, env: dict[str, str], clients: int, shards: int, mix: str) -> None:
    """Each shard connects and hashes the toolchain once in its life, not per action: run actions before the
    measured run until every shard the run will use has served one. The hits mix's 20 actions are the run's own; the
    other mixes' actions are all distinct, so warm-up rounds of new ones run until every shard has had one."""
    for round_ in range(WARM_ROUNDS):
        actions, digests = proxy_load.prepare(work / f"r{round_}", 1, distinct=mix != "hits")
        proxy_load.run_load(actions, digests, endpoint, env, clients, "steps", shards=shards)
        remove(work / f"r{round_}")
        served = {int(st.get("shard", 0)) for st in proxy_load.proxy_statuses(env) if st.get("runs", 0)}
        if mix == "hits" or len(served) >= shards:
            return
    progress(f"  warm-up: {len(served)} of {shards} shards served an action in {WARM_ROUNDS} rounds")


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench proxy-shards", description=__doc__.splitlines()[0])
    p.add_argument("--shards", type=int, default=4, help="proxy shards of the sharded runs (default 4)")
    p.add_argument("--copies", type=int, default=10, help="build directories (copies of the program) per run")
    p.add_argument("--repeats", type=int, default=10, help="times each copy runs its 20 actions in the hits mix")
    p.add_argument("--clean-copies", type=int, default=20, help="build directories of the clean mix (20 actions "
                   "each, all executed)")
    p.add_argument("--clients", type=int, default=200, help="clients at once (hits, clean-queued)")
    p.add_argument("--clean-clients", type=int, default=8, help="clients at once in the clean mix (default 8: two "
                   "per worker, so that actions hardly queue)")
    p.add_argument("--workers", type=int, default=4, help="workers of the cluster")
    p.add_argument("--mixes", default=",".join(MIXES), help=f"mixes to run, of {', '.join(MIXES)} (default: all)")
    p.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "gn-thinlto-bench")
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--name", default=NAME, help=f"result name (default {NAME}: the one the scale model reads)")
    args = p.parse_args(argv)
    if not 1 <= args.shards <= wire.MAX_SHARDS:
        p.error(f"--shards: 1 to {wire.MAX_SHARDS}")
    mixes = [m for m in args.mixes.split(",") if m]
    if not mixes or set(mixes) - set(MIXES):
        p.error(f"--mixes {args.mixes!r}: a comma-separated list of {', '.join(MIXES)}")
    prereqs.ensure()
    ctx = results.context()
    given = {k: getattr(args, k) for k in ("shards", "copies", "repeats", "clean_copies", "clients",
                                           "clean_clients", "mixes", "name")}
    command = "python -m bench proxy-shards" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in given.items() if v != p.get_default(k))
    print(f"machine: {ctx['machine'].one_line()}")
    missing = cluster_tool.available()
    if missing:
        print(f"not measured: {missing}")
        results.write(args.results, args.name, dict(ctx, missing=missing, command=command))
        return 0
    salt = f"bench-shards-{time.time_ns()}"
    state = args.cache / f"cluster-{salt}"
    state_dir = tempfile.mkdtemp(prefix="gxs-")
    work = scratch_dir(args.cache, "shard-bench-")
    env = {**os.environ, wire.STATE_DIR_ENV: state_dir}
    runs: list[proxy_load.LoadResult] = []
    try:
        endpoint = cluster_tool.start(state, args.workers)
        env = {**os.environ, wire.STATE_DIR_ENV: state_dir}  # again after the start: with this cluster's token
        for mix in mixes:
            for shards in sorted({1, args.shards}):
                name = f"{mix}-{shards}"
                _warm_up(work / f"{name}-warm", endpoint, {**env, "GOMA_EXT_CACHE_SALT": f"{salt}-{name}-warm"},
                         args.clients, shards, mix)
                copies = args.copies if mix == "hits" else args.clean_copies
                actions, digests = proxy_load.prepare(work / name, copies, args.repeats if mix == "hits" else 1,
                                                      distinct=mix != "hits")
                clients = args.clean_clients if mix == "clean" else args.clients
                r = proxy_load.run_load(actions, digests, endpoint, {**env, "GOMA_EXT_CACHE_SALT": f"{salt}-{name}"},
                                        clients, "steps", shards=shards, mix=mix, idle_s=IDLE_S)
                proxy_load.stop_proxies(env)  # the next run starts its own shards
                remove(work / name)
                runs.append(r)
                progress(f"  {mix}, {shards} shard(s): {proxy_load.describe(r)}")
    finally:
        proxy_load.stop_proxies(env)
        cluster_tool.stop(state)
        remove(state)
        remove(work)
        remove(Path(state_dir))
    print(render(["mix", "shards", "actions", "modes", "lost", "wrong", "wall s", "proxies ms/action",
                  "busiest shard ms/action", "step servers ms/action", "client side ms/action",
                  "idle proxies ms/s", "idle step servers ms/s", "busiest shard net ms/action",
                  "client side net ms/action"],
                 [_row(r) for r in runs]))
    by = {(r.mix, r.shards): r for r in runs}
    goals = {f"busiest_shard_ms_per_action_{mix}": by[mix, args.shards].busiest_shard_ms() for mix in mixes}
    goals.update({f"client_cpu_ms_per_action_{mix}": by[mix, args.shards].client_cpu_ms for mix in mixes})
    goals.update({f"net_busiest_shard_ms_per_action_{mix}": by[mix, args.shards].net_busiest_shard_ms()
                  for mix in mixes})
    goals.update({f"net_client_cpu_ms_per_action_{mix}": by[mix, args.shards].net_client_ms() for mix in mixes})
    print(render(["goal", "value"], [[k, round(v, 3)] for k, v in goals.items()]))
    data = dict(ctx, command=command, shards=args.shards, runs=[asdict(r) for r in runs], goals=goals,
                costs={f"{r.mix}-{r.shards}": costs_of(r) for r in runs}, workers=args.workers)
    print(f"results: {results.write(args.results, args.name, data)}")
    return 0
