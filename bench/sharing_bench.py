"""`python -m bench sharing`: duplicate codegen across binaries — backend jobs run vs binaries × objects.

Per workspace, clean builds with our graph: (1) thin link per binary with the content-addressed backend
cache (sharing on: compiler runs = cache misses; sharing off: every backend edge ninja ran would run the
compiler, i.e. misses + hits, as the cache is the only thing that dedupes them), and (2) test-only binaries
on shared null-index backends (`testonly: shared_null_index`: one backend edge per object and flag set,
shared by every test binary at the ninja level; no thin link). binaries × objects is the sum, over link
targets, of the bitcode objects each links: what per-binary backends would compile without any sharing.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import graph_tool, prereqs, results, subjects, synth, variants
from bench.fsio import remove, write_if_changed, write_workspace
from bench.measure import ratio, run
from bench.ninja_sdist import DEFAULT_CACHE
from bench.table import render

FULL = ("grid:10:100", "mix:6:20", "example")
QUICK = ("grid:4:20", "mix:3:6")


@dataclass(frozen=True)
class Row:
    workspace: str
    mode: str  # thin_link | null_index
    binaries: int
    binaries_x_objects: int  # backend edges of the thin-link graph
    backend_edges_run: int
    compiler_runs: int
    wall_s: float

    @property
    def sharing_off_runs(self) -> int:
        return self.backend_edges_run


def workspace_root(spec: str, cache: Path) -> tuple[str, Path]:
    kind, *size = spec.split(":")
    if kind == "example":
        return "example", subjects.example(cache).root
    ws = synth.grid(int(size[0]), int(size[1])) if kind == "grid" else synth.mix(int(size[0]), int(size[1]), 3, 2)
    return ws.name, write_workspace(ws, cache / "sharing" / ws.name / "src")


def build(name: str, root: Path, mode: str, work: Path) -> Row:
    out = work / name / f"out_{mode}"
    remove(out)
    cmd = [sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(root)]
    if mode == "null_index":
        config = work / name / "null_index.yaml"
        write_if_changed(config, graph_tool.NULL_INDEX_CONFIG)
        cmd += ["--config", str(config)]
    run(cmd)
    s = run(["ninja", "-C", str(out)])
    edges = variants.edges_run(s.output)
    misses, hits = variants.backend_log_misses(out, variants.Counters(0, 0, 0))
    binaries = sum(1 for word, _ in edges if word in ("LINK", "SOLINK"))
    return Row(name, mode, binaries, 0, sum(1 for w, _ in edges if w == "BACKEND"), misses, s.wall_s)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench sharing", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"workspaces {', '.join(QUICK)}")
    p.add_argument("--workspaces", help=f"comma-separated (default: {','.join(FULL)})")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    prereqs.ensure()
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    missing = graph_tool.available()
    if missing:
        print(f"not measured: {missing}")
        results.write(args.results, "sharing", dict(ctx, rows=[], graph_missing=missing))
        return 0
    specs = args.workspaces.split(",") if args.workspaces else (QUICK if args.quick else FULL)
    rows: list[Row] = []
    for spec in specs:
        name, root = workspace_root(spec, args.cache)
        thin = build(name, root, "thin_link", args.cache / "sharing")
        total = thin.backend_edges_run
        rows.append(Row(**{**thin.__dict__, "binaries_x_objects": total}))
        null = build(name, root, "null_index", args.cache / "sharing")
        rows.append(Row(**{**null.__dict__, "binaries_x_objects": total}))
        print(f"  {name}: done", flush=True)
    print(render(["workspace", "mode", "binaries", "binaries×objects", "edges run (sharing off)", "compiler runs",
                  "runs/(b×o) on", "runs/(b×o) off", "wall s"],
                 [[r.workspace, r.mode, r.binaries, r.binaries_x_objects, r.sharing_off_runs, r.compiler_runs,
                   ratio(r.compiler_runs, r.binaries_x_objects), ratio(r.sharing_off_runs, r.binaries_x_objects),
                   r.wall_s] for r in rows]))
    path = results.write(args.results, "sharing", dict(ctx, rows=rows, source=graph_tool.source_state(),
                                                       command="python -m bench sharing" + (" --quick" if args.quick else "")))
    print(f"results: {path}")
    return 0
