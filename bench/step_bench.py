"""`python -m bench step`: what our own backend step costs per backend edge, besides the compiler, on a cache
hit and on a miss: the step launcher with the build directory's step server (the default) against the Python
step per edge (`step_server: false`), side by side in one run ([lean], goal 1: ≤ 3 ms).

The example is generated twice (one build directory per variant) and built. Then every backend edge's command,
as ninja runs it (`/bin/sh -c` with the rule's command and the edge's argv), is run by this harness, one variant
after the other per edge, ROUNDS times:
- hit rounds: the cache holds every job: the step's whole wall time is its own cost;
- miss rounds: both caches emptied first: the step's wall time less the compiler's, which the step reports
  (GN_THINLTO_STEP_ACCOUNTING: the launcher, or the Python step, times the commands it runs);
- the floor: `/bin/sh -c /bin/true` started the same way, once per edge after each hit round: what any edge
  that starts one program costs from this harness (ninja's posix_spawn costs less than Python's fork).
CPU is the step process's own (it reports it, children excluded) plus, for the launcher, the server's CPU
over the round (/proc/PID/stat) divided by the round's steps. Afterwards both variants' native objects must be
byte-identical.
"""

from __future__ import annotations

import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import graph_tool, procs, results, rounds_cli, subjects
from bench.fsio import remove
from bench.isolation_bench import _backend_commands
from bench.measure import BenchError, progress, run
from bench.table import render

ROUNDS = 3
VARIANTS = ("server", "python")  # the launcher + step server; the Python step per edge
ACCOUNTING_ENV = "GN_THINLTO_STEP_ACCOUNTING"


@dataclass(frozen=True)
class Row:
    variant: str
    case: str  # "hit" or "miss"
    steps: int
    wall_ms: float  # median of our own wall per step (miss: less the compiler's)
    wall_mean_ms: float
    cpu_ms: float | None  # mean CPU per step: the step process, plus the server's share
    server_cpu_ms: float | None  # of which the server's


def _rule_command(out: Path) -> str:
    text = (out / "gn-thinlto/rules.ninja").read_text()
    rule = text[text.index("rule gn_thinlto_backend\n"):]
    line = next(x for x in rule.splitlines() if x.startswith("  command = "))
    return line.removeprefix("  command = ").replace("$$", "$")


def _server_pid(out: Path) -> int:
    return next((pid for pid in procs.step_servers(str(out)) if procs.cwd(pid) == str(out)), 0)


def _cpu_s(pid: int) -> float:
    if not pid:
        return 0.0
    cpu = procs.cpu_s(pid)
    if cpu is None:
        raise BenchError(f"the step server (pid {pid}) is gone mid-round")
    return cpu


def _step(command: str, out: Path, env: dict[str, str], acct: Path) -> tuple[float, float, float]:
    """(wall s, compiler wall s, CPU s of the step's own process) of one step, as ninja runs it (`/bin/sh -c`,
    which execs the step: the step's own CPU includes the shell's start)."""
    before = acct.stat().st_size if acct.exists() else 0
    start = time.perf_counter()
    proc = subprocess.run(["/bin/sh", "-c", command], cwd=out, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise BenchError(f"backend step failed in {out}: {command[:300]}")
    child_wall = cpu = 0.0
    with open(acct) as f:
        f.seek(before)
        for line in f:  # `launcher|python WALL_US CHILD_WALL_US USER_US SYS_US` (children excluded)
            words = line.split()
            child_wall += int(words[2]) / 1e6
            cpu += (int(words[3]) + int(words[4])) / 1e6
    return wall, child_wall, cpu


def measure(outs: dict[str, Path], rounds: int, work: Path) -> list[Row]:
    commands = {v: _rule_command(out) for v, out in outs.items()}
    edges = _backend_commands(outs["server"])
    acct = work / "accounting.txt"
    env = {**os.environ, ACCOUNTING_ENV: str(acct)}
    rows = []
    floor: list[float] = []
    for case in ("hit", "miss"):
        samples: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
        server_cpu = 0.0
        for r in range(rounds):
            if case == "miss":
                for out in outs.values():
                    remove(out / "gn-thinlto/cache")
            # the first edge starts the server when there is none; it is not counted
            _step(commands["server"].replace("$argv", shlex.join(edges[0])), outs["server"], env, acct)
            pid = _server_pid(outs["server"])
            cpu0 = _cpu_s(pid)
            for i, argv in enumerate(edges):
                order = VARIANTS if (i + r) % 2 == 0 else VARIANTS[::-1]
                for v in order:
                    if case == "miss" and v == "server" and i == 0:
                        continue  # its miss was the server's start above
                    wall, compiler, cpu = _step(commands[v].replace("$argv", shlex.join(argv)), outs[v], env, acct)
                    samples[v].append((wall - compiler, cpu))
            server_cpu += _cpu_s(pid) - cpu0
            progress(f"  {case} round {r + 1}/{rounds}: {len(edges)} backend steps per variant")
            if case == "hit":  # the floor: an edge that starts one program and does nothing, started alike
                for _ in edges:
                    start = time.perf_counter()
                    subprocess.run(["/bin/sh", "-c", "/bin/true"], cwd=outs["server"], check=True)
                    floor.append((time.perf_counter() - start) * 1000)
        for v in VARIANTS:
            walls = [s[0] * 1000 for s in samples[v]]
            share = server_cpu / len(samples[v]) * 1000 if v == "server" else 0.0
            cpu = statistics.mean(s[1] for s in samples[v]) * 1000 + share
            rows.append(Row(v, case, len(walls), statistics.median(walls), statistics.mean(walls), cpu, share))
    rows.append(Row("empty edge (/bin/sh -c /bin/true)", "floor", len(floor), statistics.median(floor),
                    statistics.mean(floor), None, None))
    return rows


def _same_objects(outs: dict[str, Path]) -> str:
    a, b = (outs[v] / "gn-thinlto" for v in VARIANTS)
    objects = sorted(p.relative_to(a) for p in a.glob("*/native/**/*.o"))
    differ = [str(p) for p in objects if (a / p).read_bytes() != (b / p).read_bytes()]
    if differ:
        raise BenchError(f"native objects differ between the variants: {differ[:3]}")
    return f"{len(objects)} native objects byte-identical in both variants"


def main(argv: Sequence[str]) -> int:
    args, ctx, command = rounds_cli.start("step", __doc__ or "", argv)
    missing = graph_tool.available()
    if missing:
        return rounds_cli.not_measured(args, "step", ctx, missing, command)
    subject = subjects.example(args.cache)
    work = (args.cache / "step").resolve()
    remove(work)
    work.mkdir(parents=True)
    outs = {}
    for v in VARIANTS:
        out = work / v
        config = work / f"{v}.gn_thinlto.yaml"
        config.write_text(f"step_server: {'true' if v == 'server' else 'false'}\n")
        cmd = [sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(subject.root), "--config",
               str(config)]
        run([*cmd, "--args", subject.gn_args] if subject.gn_args else cmd)
        run(["ninja", "-C", str(out)])
        outs[v] = out
    if "step-launcher" not in _rule_command(outs["server"]):
        raise BenchError("the server variant's backend rule has no step launcher (see `gn-thinlto gen`'s warning)")
    rows = measure(outs, 1 if args.quick else ROUNDS, work)
    check = _same_objects(outs)
    header = ["variant", "case", "steps", "own wall ms (median)", "own wall ms (mean)", "CPU ms per step",
              "of which server"]
    print(render(header, [[r.variant, r.case, r.steps, r.wall_ms, r.wall_mean_ms, r.cpu_ms, r.server_cpu_ms]
                          for r in rows]))
    print(f"check: {check}")
    path = results.write(args.results, "step", dict(ctx, rows=rows, check=check, source=graph_tool.source_state(),
                                                    command=command))
    print(f"results: {path}")
    return 0
