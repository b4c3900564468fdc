"""`python -m bench regen`: the hook after a one-line BUILD.gn edit, incremental against a full run ([hook-perf]).

On the Chromium-shaped workspace (bench.subjects.synth.chromium), in its default mode (test executables on shared
null-index backends, gn_thinlto.yaml `testonly: shared_null_index`) and with every link thin-linked. For each
kind of edit, REPEAT edits of that kind, each on another target: apply the edit (one new source in one
target's `sources`), run `gn gen` (GN alone: its --json-ide-script is a script that does nothing, so that the
hook is timed on its own), then the hook with its state from the previous run (incremental). Then the same
`gn gen` and the hook again without the state (full): side by side, on the same files, in one run. The two
must write the same bytes (every ninja file and manifest is compared; the benchmark fails otherwise).
Reported: the median of incremental / full per edit kind, gn gen's own time, and a regeneration with no change.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import graph_tool, prereqs, results, scale_bench
from bench.fsio import remove, write_if_changed, write_workspace
from bench.measure import BenchError, Sample, progress, ratio, run
from bench.subjects import synth
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render

STATE_FILE = "gn-thinlto/hook_state.pickle"
MODES = {"null_index": graph_tool.NULL_INDEX_CONFIG, "graph": ""}


@dataclass(frozen=True)
class Edit:
    kind: str  # what the table calls it
    pattern: str  # BUILD.gn files (glob under the root) whose first target gets a new source


EDITS = (
    Edit("no change", ""),
    Edit("a test's sources", "tests/t*/BUILD.gn"),
    Edit("a tool's sources", "tools/tool*/BUILD.gn"),
    Edit("a component library's sources", "components/l*/BUILD.gn"),
)


@dataclass(frozen=True)
class Row:
    workspace: str
    mode: str
    edit: str
    target: str
    gn_gen_s: float
    incremental_s: float
    incremental_rss_mib: float
    full_s: float
    full_rss_mib: float
    planned: int  # links the incremental run planned again
    links: int


def _gn_gen(out: Path, root: Path, noop_script: Path) -> Sample:
    return run(["gn", "gen", str(out), f"--root={root}", f"--args={scale_bench.GN_ARGS}", "--ide=json",
                f"--json-ide-script={noop_script}", "-q"])


def _snapshot(out: Path) -> dict[str, str]:
    """Digest of every ninja file and manifest under OUT (GN's and ours)."""
    return {p.relative_to(out).as_posix(): hashlib.sha1(p.read_bytes(), usedforsecurity=False).hexdigest()
            for pattern in ("**/*.ninja", "**/thinlink.json") for p in out.glob(pattern)}


def _planned(sample: Sample, links: int) -> int:
    for line in sample.output.splitlines():
        if "unchanged since the last run" in line:
            return int(line.rsplit(", ", 1)[1].split()[0])
    return links


def _apply(edit: Edit, root: Path, n: int) -> str:
    """Add one new source to the Nth BUILD.gn matching EDIT (a different target each time); return its label."""
    files = sorted(root.glob(edit.pattern))
    if not files:
        raise BenchError(f"no {edit.pattern} in the workspace")
    build = files[(n * 7919) % len(files)]
    text = build.read_text()
    source = f"regen_{n}.cc"
    (build.parent / source).write_text(f"int regen_{n}_{build.parent.name}(int x) {{ return x + {n}; }}\n")
    write_if_changed(build, text.replace('sources = ["', f'sources = ["{source}", "', 1))
    return f"//{build.parent.relative_to(root).as_posix()}"


def bench_mode(ws: synth.Workspace, mode: str, work: Path, repeat: int, rows: list[Row],
               save: Callable[[], None]) -> None:
    root = write_workspace(ws, work / "src")
    for stale in root.rglob("regen_*.cc"):
        stale.unlink()
    config: Path | None = None
    if MODES[mode]:
        config = work / f"{mode}.yaml"
        write_if_changed(config, MODES[mode])
    noop = work / "noop_hook.py"
    write_if_changed(noop, "# GN runs this instead of the hook, which the benchmark runs and times itself.\n")
    out = work / f"out_{mode}"
    remove(out)
    progress(f"  {ws.name} {mode}: first gn gen + hook")
    _gn_gen(out, root, noop)
    graph_tool.hook(out, config)
    n = 0
    for edit in EDITS:
        for _ in range(1 if not edit.pattern else repeat):
            n += 1
            target = _apply(edit, root, n) if edit.pattern else ""
            gen = _gn_gen(out, root, noop)
            inc = graph_tool.hook(out, config)
            incremental = _snapshot(out)
            (out / STATE_FILE).unlink()
            _gn_gen(out, root, noop)
            full = graph_tool.hook(out, config)
            full_files = _snapshot(out)
            differ = sorted(p for p in set(incremental) | set(full_files) if incremental.get(p) != full_files.get(p))
            if differ:
                raise BenchError(f"{ws.name} {mode} after {edit.kind} ({target}): the incremental hook wrote "
                                 f"other bytes than the full run: {', '.join(differ[:3])}")
            rows.append(Row(ws.name, mode, edit.kind, target, gen.wall_s, inc.wall_s, inc.max_rss_mib, full.wall_s,
                            full.max_rss_mib, _planned(inc, len(ws.links)), len(ws.links)))
            progress(f"  {ws.name} {mode}: {edit.kind} {target}: incremental {inc.wall_s:.2f} s "
                     f"({rows[-1].planned} links planned), full {full.wall_s:.2f} s")
            save()
    remove(out)


def ratios(rows: Sequence[Row]) -> list[dict[str, object]]:
    """Per workspace, mode and edit: median incremental hook time over the full run's (side by side)."""
    out = []
    for key in dict.fromkeys((r.workspace, r.mode, r.edit) for r in rows):
        rs = [r for r in rows if (r.workspace, r.mode, r.edit) == key]
        out.append({"workspace": key[0], "mode": key[1], "edit": key[2], "repeats": len(rs),
                    "incremental_vs_full": statistics.median(ratio(r.incremental_s, r.full_s) or 0 for r in rs),
                    "incremental_s": statistics.median(r.incremental_s for r in rs),
                    "full_s": statistics.median(r.full_s for r in rs),
                    "gn_gen_s": statistics.median(r.gn_gen_s for r in rs),
                    "planned": statistics.median(r.planned for r in rs), "links": rs[0].links})
    return out


def table(rat: Sequence[dict[str, object]]) -> str:
    return render(["workspace / mode", "edit", "links planned", "gn gen s", "hook full s", "hook incremental s",
                   "incremental / full"],
                  [[f"{r['workspace']} {r['mode']}", r["edit"], f"{r['planned']:g} of {r['links']}", r["gn_gen_s"],
                    r["full_s"], r["incremental_s"], r["incremental_vs_full"]] for r in rat])


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench regen", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a 4,000-object workspace, one edit of each kind")
    p.add_argument("--objects", type=int, help="objects of the Chromium-shaped workspace (default 40,000)")
    p.add_argument("--repeat", type=int, help="edits of each kind, each on another target (median; default 3)")
    p.add_argument("--modes", default="null_index,graph", help="null_index (the default mode) and/or graph")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    prereqs.ensure()
    if graph_tool.available() is not None:
        raise BenchError(str(graph_tool.available()))
    objects = args.objects or (4_000 if args.quick else 40_000)
    repeat = args.repeat or (1 if args.quick else 3)
    modes = [m for m in args.modes.split(",") if m]
    if not set(modes) <= set(MODES):
        raise BenchError(f"--modes: {args.modes!r}: each must be one of {', '.join(MODES)}")
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    ws = scale_bench.chromium_workspace(objects)
    command = "python -m bench regen" + (" --quick" if args.quick else "") + \
        (f" --objects {args.objects}" if args.objects else "") + (f" --repeat {args.repeat}" if args.repeat else "") + \
        (f" --modes {args.modes}" if args.modes != "null_index,graph" else "")
    rows: list[Row] = []

    def save() -> Path:
        return results.write(args.results, "regen", dict(ctx, rows=rows, ratios=ratios(rows), command=command,
                                                         source=graph_tool.source_state()))

    for mode in modes:
        bench_mode(ws, mode, args.cache / "regen" / ws.name, repeat, rows, save)
    path = save()
    print(table(ratios(rows)))
    print(f"results: {path}")
    return 0
