"""`python -m bench sharing`: duplicate codegen across binaries — backend jobs run vs binaries × objects.

Per workspace, clean builds with our graph, each twice, with the content-addressed backend cache (sharing
on) and with `backend_cache: false` (sharing off; compiler runs = backend edges ninja ran): (1) thin link
per binary, and (2) test-only binaries on shared null-index backends (`testonly: shared_null_index`: one
backend edge per object and flag set, shared by every test binary at the ninja level; no thin link).
binaries × objects is the number of backend edges of the thin-link graph (one per bitcode object per link
target): what per-binary backends compile without any sharing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import graph_tool, prereqs, results, subjects, variants
from bench.fsio import remove, write_if_changed, write_workspace
from bench.measure import progress, ratio, run
from bench.subjects import synth
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render

FULL = ("grid:10:100", "mix:6:20", "example")
QUICK = ("grid:4:20", "mix:3:6")


MODE_CONFIG = {"thin_link": "", "null_index": graph_tool.NULL_INDEX_CONFIG}
CACHE_OFF_CONFIG = "backend_cache: false\n"


@dataclass(frozen=True)
class Build:
    binaries: int
    backend_edges_run: int
    compiler_runs: int
    wall_s: float


@dataclass(frozen=True)
class Row:
    workspace: str
    mode: str  # thin_link | null_index
    binaries: int
    binaries_x_objects: int  # backend edges of the thin-link graph
    backend_edges_run: int
    compiler_runs: int  # sharing on (backend cache)
    wall_s: float
    compiler_runs_off: int  # sharing off (backend_cache: false), measured
    wall_off_s: float


def workspace_root(spec: str, cache: Path) -> tuple[str, Path]:
    kind, *size = spec.split(":")
    if kind == "example":
        return "example", subjects.example(cache).root
    ws = synth.grid(int(size[0]), int(size[1])) if kind == "grid" else synth.mix(int(size[0]), int(size[1]), 3, 2)
    return ws.name, write_workspace(ws, cache / "sharing" / ws.name / "src")


def build(name: str, root: Path, mode: str, work: Path, cache: bool) -> Build:
    label = mode if cache else f"{mode}_nocache"
    out = work / name / f"out_{label}"
    remove(out)
    config = work / name / f"{label}.yaml"
    write_if_changed(config, MODE_CONFIG[mode] + ("" if cache else CACHE_OFF_CONFIG))
    run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(root), "--config", str(config)])
    s = run(["ninja", "-C", str(out)])
    edges = variants.edges_run(s.output)
    misses, _hits = variants.backend_log_misses(out, variants.Counters(0, 0, 0))
    binaries = sum(1 for word, _ in edges if word in ("LINK", "SOLINK"))
    return Build(binaries, sum(1 for w, _ in edges if w == "BACKEND"), misses, s.wall_s)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench sharing", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"workspaces {', '.join(QUICK)}")
    p.add_argument("--workspaces", help=f"comma-separated (default: {','.join(FULL)})")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    prereqs.ensure()
    ctx = results.context()
    command = "python -m bench sharing" + (" --quick" if args.quick else "")
    print(f"machine: {ctx['machine'].one_line()}")
    missing = graph_tool.available()
    if missing:
        print(f"not measured: {missing}")
        results.write(args.results, "sharing", dict(ctx, rows=[], graph_missing=missing, command=command))
        return 0
    specs = args.workspaces.split(",") if args.workspaces else (QUICK if args.quick else FULL)
    rows: list[Row] = []
    for spec in specs:
        name, root = workspace_root(spec, args.cache)
        total = 0
        for mode in MODE_CONFIG:
            on = build(name, root, mode, args.cache / "sharing", cache=True)
            off = build(name, root, mode, args.cache / "sharing", cache=False)
            total = total or on.backend_edges_run  # the thin-link graph comes first
            rows.append(Row(name, mode, on.binaries, total, on.backend_edges_run, on.compiler_runs, on.wall_s,
                            off.compiler_runs, off.wall_s))
            progress(f"  {name} {mode}: compiler runs {on.compiler_runs} on, {off.compiler_runs} off")
    print(render(["workspace", "mode", "binaries", "binaries×objects", "edges run", "runs off", "runs on",
                  "off/(b×o)", "on/(b×o)", "wall off s", "wall on s"],
                 [[r.workspace, r.mode, r.binaries, r.binaries_x_objects, r.backend_edges_run, r.compiler_runs_off,
                   r.compiler_runs, ratio(r.compiler_runs_off, r.binaries_x_objects),
                   ratio(r.compiler_runs, r.binaries_x_objects), r.wall_off_s, r.wall_s] for r in rows]))
    path = results.write(args.results, "sharing", dict(ctx, rows=rows, source=graph_tool.source_state(),
                                                       command=command))
    print(f"results: {path}")
    return 0
