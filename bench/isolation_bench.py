"""`python -m bench isolation`: the per-action cost of the worker's sandbox (bubblewrap + rlimits) against
`--isolation none`, on the example's ThinLTO backends, side by side in one run.

The example is built locally once (for its bitcode and indexes); then each backend
command (what the REAPI action runs: `clang … -fthinlto-index=… -c … -o …`) is run through the worker's own
`sandbox.run`, alternately bare and sandboxed, ROUNDS times, with the build directory as the input root. The
input root's materialisation and the uploads are the same in both modes and are left out: the difference is the
sandbox's set-up and tear-down. `/usr/bin/true` gives the same cost with nothing to hide it.

Then, side by side in the same run, the worker's own steps around each backend sent with its toolchain as inputs
(bench/lease_phases.py): what [harden]'s checks cost per action against the whole lease.
"""

from __future__ import annotations

import os
import shlex
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import graph_tool, lease_phases, results, rounds_cli, subjects, variants
from bench.fsio import remove
from bench.measure import progress, run
from bench.table import render
from bench.variants import Variant

ROUNDS = 3
TRUE_RUNS = 50


@dataclass(frozen=True)
class Row:
    action: str  # "true" or "backends (N)"
    runs: int
    none_ms: float  # median per action, --isolation none
    bwrap_ms: float  # median per action, sandboxed
    cost_ms: float  # median of the paired differences
    none_mean_ms: float
    bwrap_mean_ms: float


def _backend_commands(out: Path) -> list[list[str]]:
    """The clang command of every backend edge: each link's ninja file binds `argv` per edge from two
    file-scope variables (the edges reach ninja through dyndep, so `ninja -t commands` does not list them)."""
    cmds = []
    for ninja_file in sorted(out.glob("gn-thinlto/*/build.ninja")):
        scope: dict[str, str] = {}
        for line in ninja_file.read_text().splitlines():
            name, eq, value = line.partition(" = ")
            if eq and not line.startswith(" ") and name.isidentifier():
                scope[name] = value
            elif eq and line.startswith("  argv = "):
                for var, val in scope.items():
                    value = value.replace(f"${var}", val)
                argv = shlex.split(value)
                # a one-step backend (`clang -c -x ir …`): not a link, nor a two-step one (`--cg-opt-level=N clang …`,
                # the backend step's option: two compiler runs)
                if "-c" in argv and "ir" in argv and not argv[0].startswith("-"):
                    cmds.append(argv)
    return cmds


def _isolations() -> tuple[object, object]:
    from goma_ext.worker.sandbox import Isolation, IsolationMode, Limits

    return Isolation(IsolationMode.NONE, Limits(), None), Isolation(IsolationMode.BWRAP, Limits(), None)


def _time(iso: object, argv: list[str], root: Path, logs: Path) -> float:
    from goma_ext.worker import sandbox

    exe = Path(shutil.which(argv[0]) or argv[0]).resolve()
    argv = [Path(argv[0]).name, *argv[1:]]  # as goma-ext's client sends it; the worker maps it to `exe`
    t = time.perf_counter()
    done = sandbox.run(iso, argv, exe, root, ".", {}, 600, logs)  # type: ignore[arg-type]
    dt = time.perf_counter() - t
    if done.exit_code != 0:
        raise RuntimeError(f"{shlex.join(argv)} failed: {done.stderr.decode(errors='replace')[-500:]}")
    return dt * 1000


def _row(name: str, pairs: Sequence[tuple[float, float]]) -> Row:
    bare, boxed = [p[0] for p in pairs], [p[1] for p in pairs]
    return Row(name, len(pairs), statistics.median(bare), statistics.median(boxed),
               statistics.median(b - a for a, b in pairs), statistics.mean(bare), statistics.mean(boxed))


def measure(out: Path, rounds: int) -> list[Row]:
    bare, boxed = _isolations()
    logs = Path(tempfile.mkdtemp(prefix="gx-bench-logs-"))
    try:
        pairs_true = []
        for i in range(TRUE_RUNS):
            order = (bare, boxed) if i % 2 == 0 else (boxed, bare)
            times = {id(o): _time(o, ["true"], out, logs) for o in order}
            pairs_true.append((times[id(bare)], times[id(boxed)]))
        cmds = _backend_commands(out)
        for argv in cmds:  # as the worker does for declared outputs (a backend the cache served has no dir)
            (out / argv[argv.index("-o") + 1]).parent.mkdir(parents=True, exist_ok=True)
        pairs = []
        for r in range(rounds):
            for i, argv in enumerate(cmds):
                order = (bare, boxed) if (i + r) % 2 == 0 else (boxed, bare)
                times = {id(o): _time(o, argv, out, logs) for o in order}
                pairs.append((times[id(bare)], times[id(boxed)]))
            progress(f"  round {r + 1}/{rounds}: {len(cmds)} backends")
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    return [_row("/usr/bin/true", pairs_true), _row(f"example backends ({len(cmds)})", pairs)]


def main(argv: Sequence[str]) -> int:
    args, ctx, command = rounds_cli.start("isolation", __doc__ or "", argv)
    missing = graph_tool.available() or (None if shutil.which("bwrap") else "bwrap (Debian bubblewrap) not installed")
    if missing:
        return rounds_cli.not_measured(args, "isolation", ctx, missing, command)
    subject = subjects.example(args.cache)
    out = args.cache / "isolation" / "out"
    remove(out)
    variants.configure(Variant.GRAPH, out, subject.root, subject.gn_args)
    run(["ninja", "-C", str(out)])
    os.chmod(out, 0o755)
    rounds = 1 if args.quick else ROUNDS
    rows = measure(out, rounds)
    print(render(["action", "runs", "none ms (median)", "bwrap ms (median)", "cost ms (median of pairs)",
                  "none ms (mean)", "bwrap ms (mean)"],
                 [[r.action, r.runs, r.none_ms, r.bwrap_ms, r.cost_ms, r.none_mean_ms, r.bwrap_mean_ms] for r in rows]))
    phases = lease_phases.measure(out, _backend_commands(out), rounds)
    print(render(["worker step (per backend lease, toolchain as inputs)", "leases", "ms (median)", "ms (mean)",
                  "share of the lease (means)"],
                 [[p.phase, p.actions, p.median_ms, p.mean_ms, p.share_of_lease] for p in phases]))
    path = results.write(args.results, "isolation", dict(ctx, rows=rows, phases=phases,
                                                         source=graph_tool.source_state(), command=command))
    print(f"results: {path}")
    return 0
