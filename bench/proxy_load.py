"""The proxy load test: thousands of clients, up to hundreds at once, through one proxy to the local cluster.

Workspace: COPIES copies of bench.subjects.thin_program (5 modules); each copy runs every distinct action REPEATS times
(5 modules × the -O variants; repeats write outputs of other names), so identical actions arrive concurrently
from different directories, as from parallel builds. Every output is compared with a local compile of the same
command (0 wrong), every client must exit 0 with a stats record that is not a local fallback (0 lost). CPU is
attributed per component from /proc.

Two kinds of client: `thin`, a `python -S …/thin_client.py` process per action (what the Python backend step
runs in its own process); `steps`, the backend step as a build runs it ([lean]): the step launcher, the copy's
step server (which calls the thin client in its own process) and, for the edges that come before the server is
up, the Python step. The client CPU of `steps` is the launchers', the Python steps' and the step servers'.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import procs
from bench.fsio import REPO
from bench.subjects import thin_program
from gn_thinlto.steps.launcher_build import build_launcher
from gn_thinlto.steps.step_args import socket_path
from goma_ext.remote.identity import identify_cached
from goma_ext.remote.names import COMPILER_CACHE

THIN_CLIENT = REPO / "goma_ext" / "remote" / "thin_client.py"
BACKEND_STEP = REPO / "gn_thinlto" / "steps" / "backend.py"
STEP_SERVER = REPO / "gn_thinlto" / "steps" / "step_server.py"
VARIANTS = ("-O2", "-O1", "-Os", "-O3")
COMPONENTS = ("proxy", "buildgrid", "postgres", "workers")
CLIENTS = ("thin", "steps")


@dataclass(frozen=True)
class Action:
    copy: Path  # a workspace copy
    module: str
    variant: str
    repeat: int = 0  # the same action again, its output under another name
    # An inert flag naming the copy (same object, another command line and content key): a clean build's backends
    # are all distinct, and are spread over the shards as such; the load test's 20 modules alone would reach at most
    # 20 shards, unevenly.
    tag: str = ""

    @property
    def output(self) -> str:
        return f"obj/{self.module}{self.variant}{f'.r{self.repeat}' if self.repeat else ''}.native.o"

    def argv(self) -> list[str]:
        tag = (f"-fdebug-prefix-map={self.tag}=.",) if self.tag else ()
        argv = thin_program.ThinProgram(self.copy).backend(self.module, extra=(self.variant, *tag))
        return [*argv[:-1], self.output]


def step_python() -> list[str]:
    """The Python backend step as the load test's rule spells it: no backend cache, so every step goes remote."""
    return [sys.executable, "-S", str(BACKEND_STEP), "--no-cache", "--log", "gn-thinlto/backend.log"]


def step_argv(launcher: Path, thin: Sequence[str], action: Action) -> list[str]:
    """ACTION as a build's remote backend edge: the step launcher, the Python step behind it, the thin client."""
    python = step_python()
    sock = socket_path(python, "gn-thinlto")
    return [str(launcher), sock, *python, "--socket", sock, "--launcher", "--", *thin, "--", *action.argv()]


@dataclass(frozen=True)
class LoadResult:
    actions: int
    clients: int
    distinct: int
    lost: int
    wrong: int
    modes: dict[str, int]
    wall_s: float
    p50_ms: float
    p99_ms: float
    client_cpu_ms: float  # per action: the client processes (rusage of reaped children) and the step servers
    cpu_s: dict[str, float]  # per component over the run
    proxy: dict[str, Any]  # the proxy's own figures at the end
    client: str = "thin"  # one of CLIENTS
    step_server_cpu_s: float = 0.0  # of client_cpu_ms: the step servers' CPU (from /proc)
    python_steps: int = 0  # steps the launcher left to the Python step (no server answered in time)
    shard_cpu_s: dict[int, float] = field(default_factory=dict)  # [scale] each proxy shard's CPU over the run
    mix: str = "hits"  # "hits": the copies share their actions; anything else: every action distinct (executed)
    # [scale] CPU seconds per second while nothing ran (idle_s before the run): each shard's, the step servers'
    idle_shard_cpu_per_s: dict[int, float] = field(default_factory=dict)
    idle_step_server_cpu_per_s: float = 0.0

    @property
    def shards(self) -> int:
        return max(1, len(self.shard_cpu_s))

    def busiest_shard_ms(self) -> float:
        """The busiest shard's CPU per action of the whole run (what bounds a build: shards run in parallel)."""
        return 1000 * max(self.shard_cpu_s.values(), default=self.cpu_s.get("proxy", 0.0)) / self.actions

    def _idle_s(self, per_s: float) -> float:
        return per_s * self.wall_s

    def net_busiest_shard_ms(self) -> float:
        """busiest_shard_ms without the background each shard spends over the run's wall time whatever it serves
        (measured while idle): the marginal cost of an action, which a longer build pays per action."""
        if not self.shard_cpu_s:
            return self.busiest_shard_ms()
        return 1000 * max(cpu - self._idle_s(self.idle_shard_cpu_per_s.get(shard, 0.0))
                          for shard, cpu in self.shard_cpu_s.items()) / self.actions

    def net_proxy_ms(self) -> float:
        return self.per_action_ms("proxy") - 1000 * self._idle_s(sum(self.idle_shard_cpu_per_s.values())) / self.actions

    def net_step_server_ms(self) -> float:
        return 1000 * (self.step_server_cpu_s - self._idle_s(self.idle_step_server_cpu_per_s)) / self.actions

    def net_client_ms(self) -> float:
        return self.client_cpu_ms - 1000 * self._idle_s(self.idle_step_server_cpu_per_s) / self.actions

    @property
    def throughput(self) -> float:
        return self.actions / self.wall_s

    def per_action_ms(self, component: str) -> float:
        return 1000 * self.cpu_s.get(component, 0.0) / self.actions


def prepare(work: Path, copies: int, repeats: int = 1, distinct: bool = False
            ) -> tuple[list[Action], dict[tuple[str, str], str]]:
    """The workspace copies, the actions (copy-major: concurrent clients share actions) and reference digests.
    DISTINCT: no two copies' actions have the same command line (each carries a tag naming WORK and its copy)."""
    template = thin_program.build(work / "template")
    # Each copy is a build directory that has run a backend before: its compiler identity is remembered there.
    identify_cached(thin_program.CLANG, template.out, template.out / COMPILER_CACHE)
    ref = template.copy(work / "ref")
    digests = {}
    for module in thin_program.MODULES:
        for variant in VARIANTS:
            action = Action(ref.root, module, variant)
            subprocess.run(action.argv(), cwd=ref.out, check=True)
            digests[(module, variant)] = hashlib.sha256((ref.out / action.output).read_bytes()).hexdigest()
    actions = []
    for i in range(copies):
        copy = template.copy(work / f"c{i:04d}")
        (copy.out / "gn-thinlto").mkdir(exist_ok=True)
        tag = f"{work.name}.{i}" if distinct else ""
        actions += [Action(copy.root, m, v, r, tag) for r in range(repeats) for m in thin_program.MODULES
                    for v in VARIANTS]
    return actions, digests


def _step_servers(work: Path) -> dict[int, float]:
    """CPU seconds (self + reaped children) of the step servers running in WORK's copies, by pid."""
    return {pid: cpu for pid in procs.step_servers(str(work)) if (cpu := procs.cpu_s(pid, children=True)) is not None}


def _component(cmd: str) -> str | None:
    if cmd.startswith("postgres"):
        return "postgres"
    if "proxy serve" in cmd:
        return "proxy"
    if "bgd server" in cmd or "bgd_launch.py server" in cmd:  # the cluster starts bgd through bgd_launch.py
        return "buildgrid"
    return "workers" if "goma_ext.cli worker" in cmd else None


def _cpu_by_component() -> dict[tuple[str, int], float]:
    """CPU seconds (self + reaped children) of the cluster's processes and the proxy, from /proc, by (component,
    pid)."""
    out: dict[tuple[str, int], float] = {}
    for pid, cmd in procs.processes():
        kind = _component(cmd.replace(b"\0", b" ").decode(errors="replace"))
        cpu = procs.cpu_s(pid, children=True) if kind else None
        if kind and cpu is not None:
            out[kind, pid] = cpu
    return out


def _cpu_between(before: Mapping[tuple[str, int], float], after: Mapping[tuple[str, int], float]) -> dict[str, float]:
    """CPU seconds per component between two samples: each process's growth (a process that ended in between is
    not counted: a short-lived PostgreSQL backend's CPU is lost, never negative)."""
    out = dict.fromkeys(COMPONENTS, 0.0)
    for (kind, pid), cpu in after.items():
        out[kind] += cpu - before.get((kind, pid), 0.0)
    return out


SERVER_IDLE_S = 900  # a copy's step server waits for its copy's turn; a build's never waits that long between edges


def start_step_server(out: Path, timeout_s: float = 30.0) -> None:
    """Start OUT's step server, as the first backend edge of a build there would, and wait until it listens: the
    load test measures build directories that have run backends before (as their compiler identities say). It stays
    until run_load ends it: with its default idle time (60 s) the servers of the last copies of a slow run left
    before their turn, and their launchers ran Python steps no build would."""
    python = step_python()
    sock = socket_path(python, "gn-thinlto")
    with open(out / f"{sock}.log", "ab") as log:
        subprocess.Popen([*python[:2], str(STEP_SERVER), "--socket", sock, "--idle", str(SERVER_IDLE_S), *python[3:]],
                         cwd=out, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not (out / sock).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no step server came up in {out}: {(out / f'{sock}.log').read_text()[-500:]}")
        time.sleep(0.02)


def _one(action: Action, endpoint: str, env: Mapping[str, str], launcher: Path | None,
         salt_per_copy: bool = False) -> tuple[int, float, str]:
    thin = [sys.executable, "-S", str(THIN_CLIENT), "--remote", endpoint, "--exec-root", ".."]
    cmd = [*thin, "--", *action.argv()] if launcher is None else step_argv(launcher, thin, action)
    if salt_per_copy:  # a clean build's mix: no copy shares an action with another
        env = {**env, "GOMA_EXT_CACHE_SALT": f"{env.get('GOMA_EXT_CACHE_SALT', '')}-{action.copy.name}"}
    t = time.monotonic()
    proc = subprocess.run(cmd, cwd=action.copy / "out", capture_output=True, text=True, env=dict(env), check=False)
    return proc.returncode, time.monotonic() - t, proc.stderr


def proxy_statuses(env: Mapping[str, str]) -> list[dict[str, Any]]:
    """`goma-ext proxy status --json`: every shard's figures."""
    out = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "status", "--json"], capture_output=True,
                         text=True, check=True, env=dict(env)).stdout
    return list(json.loads(out))


def _proxy_status(env: Mapping[str, str]) -> dict[str, Any]:
    """The figures of shard 0 (the only proxy unless the run has shards)."""
    found = [s for s in proxy_statuses(env) if s.get("shard", 0) == 0]
    return dict(found[0]) if found else {}


def _idle_rates(work: Path, env: Mapping[str, str], seconds: float) -> tuple[dict[int, float], float]:
    """CPU seconds per second of each proxy shard and of WORK's step servers over SECONDS in which nothing runs: the
    background (polls, timers, gRPC's threads) they spend whatever they serve."""
    before, servers_before = _cpu_by_component(), _step_servers(work)
    time.sleep(seconds)
    after, servers_after = _cpu_by_component(), _step_servers(work)
    shards = {shard: cpu / seconds for shard, cpu in _shard_growth(before, after, env).items()}
    servers = sum(cpu - servers_before.get(pid, cpu) for pid, cpu in servers_after.items()) / seconds
    return shards, servers


def _shard_growth(before: Mapping[tuple[str, int], float], after: Mapping[tuple[str, int], float],
                  env: Mapping[str, str]) -> dict[int, float]:
    """CPU seconds of each running proxy shard (by shard number) between two _cpu_by_component samples."""
    by_pid = {int(st["pid"]): int(st.get("shard", 0)) for st in proxy_statuses(env)}
    return {by_pid[pid]: cpu - before.get((kind, pid), 0.0) for (kind, pid), cpu in after.items()
            if kind == "proxy" and pid in by_pid}


def run_load(actions: Sequence[Action], digests: Mapping[tuple[str, str], str], endpoint: str,
             env: Mapping[str, str], clients: int, client: str = "thin", shards: int = 1,
             mix: str = "hits", idle_s: float = 0.0) -> LoadResult:
    """Run every action through CLIENT (one of CLIENTS), at most `clients` at once, through SHARDS proxies; with a
    MIX other than "hits" each copy's actions get a cache salt of their own, so that every action executes; check and
    measure. IDLE_S > 0: first measure the proxies' and step servers' background over that many idle seconds."""
    env = {**env, "GOMA_EXT_PROXY_SHARDS": str(shards)}
    subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "start", "--remote", endpoint],
                   check=True, env=dict(env), capture_output=True)
    work = Path(os.path.commonpath([str(a.copy) for a in actions]))
    launcher = None
    if client == "steps":
        launcher = work / "step-launcher"
        why = build_launcher(str(work), launcher.name)
        if why:
            raise RuntimeError(f"step launcher: {why}")
        for copy in dict.fromkeys(a.copy for a in actions):
            start_step_server(copy / "out")
    accounting = work / f"steps-{client}.txt"  # one line per launcher and per Python step
    env = {**env, "GN_THINLTO_STEP_ACCOUNTING": str(accounting)}
    idle_shards, idle_servers = _idle_rates(work, env, idle_s) if idle_s > 0 else ({}, 0.0)
    servers_before = _step_servers(work)
    before_cpu, before_children = _cpu_by_component(), resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    with ThreadPoolExecutor(clients) as pool:
        done = list(pool.map(lambda a: _one(a, endpoint, env, launcher, mix != "hits"), actions))
    wall = time.monotonic() - t
    after_children, after_cpu = resource.getrusage(resource.RUSAGE_CHILDREN), _cpu_by_component()
    servers = _step_servers(work)
    for pid in servers:  # they would leave when idle; the next run must start its own
        os.kill(pid, signal.SIGTERM)
    server_cpu = sum(cpu - servers_before.get(pid, 0.0) for pid, cpu in servers.items())
    client_cpu = (after_children.ru_utime + after_children.ru_stime
                  - before_children.ru_utime - before_children.ru_stime) + server_cpu
    shard_cpu = _shard_growth(before_cpu, after_cpu, env)
    wrong = sum(
        1 for a in actions
        if hashlib.sha256((a.copy / "out" / a.output).read_bytes()).hexdigest() != digests[(a.module, a.variant)]
    )
    modes: Counter[str] = Counter()
    for copy in dict.fromkeys(a.copy for a in actions):
        for line in (copy / "out" / "gn_thinlto_remote.jsonl").read_text().splitlines():
            modes[json.loads(line)["mode"]] += 1
    lost = sum(1 for rc, _, _ in done if rc != 0) + max(0, len(actions) - sum(modes.values())) + modes["fallback"]
    latencies = sorted(s for _, s, _ in done)
    kinds = Counter(line.split(" ", 1)[0] for line in accounting.read_text().splitlines()) if accounting.exists() \
        else Counter()
    return LoadResult(
        actions=len(actions), clients=clients, distinct=len(digests), lost=lost, wrong=wrong, modes=dict(modes),
        wall_s=wall, p50_ms=1000 * statistics.median(latencies),
        p99_ms=1000 * latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        client_cpu_ms=1000 * client_cpu / len(actions), client=client, step_server_cpu_s=server_cpu,
        python_steps=kinds["python"],
        cpu_s=_cpu_between(before_cpu, after_cpu),
        proxy=_proxy_status(env), shard_cpu_s=dict(sorted(shard_cpu.items())), mix=mix,
        idle_shard_cpu_per_s=dict(sorted(idle_shards.items())), idle_step_server_cpu_per_s=idle_servers,
    )


def stop_proxies(env: Mapping[str, str]) -> None:
    subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "stop"], capture_output=True, env=dict(env),
                   timeout=120, check=False)


def describe(r: LoadResult) -> str:
    """The load test's table rows as text (also what the benchmark prints)."""
    cpu = ", ".join(f"{c} {r.per_action_ms(c):.1f}" for c in COMPONENTS)
    return (f"{r.client}: {r.actions} actions ({r.distinct} distinct) from up to {r.clients} clients: {r.lost} lost, "
            f"{r.wrong} wrong, modes {dict(sorted(r.modes.items()))}; {r.wall_s:.1f} s, {r.throughput:.1f} actions/s, "
            f"latency p50 "
            f"{r.p50_ms:.0f} ms p99 {r.p99_ms:.0f} ms; CPU ms/action: client {r.client_cpu_ms:.1f}, {cpu}"
            + (f"; {r.python_steps} Python steps, step servers {1000 * r.step_server_cpu_s / r.actions:.2f} ms/action"
               if r.client == "steps" else "")
            + (f"; {r.shards} proxy shards, busiest {r.busiest_shard_ms():.2f} ms/action" if r.shards > 1 else "")
            + (f"; idle: proxies {1000 * sum(r.idle_shard_cpu_per_s.values()):.1f} ms/s, step servers "
               f"{1000 * r.idle_step_server_cpu_per_s:.1f} ms/s; net of it: busiest shard "
               f"{r.net_busiest_shard_ms():.2f}, client side {r.net_client_ms():.2f} ms/action"
               if r.idle_shard_cpu_per_s else ""))
