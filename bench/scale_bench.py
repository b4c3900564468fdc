"""`python -m bench scale`: ninja graph scale — GN alone, GN + our graph, our shared null-index mode, naive baseline.

For each workspace (grid M×N, Chromium-like mix): generation time (gn gen; the hook alone), size of the ninja
files, and ninja's no-op on a directory marked built by bench/mark_built.cc (wall, peak RSS, ninja's own
`.ninja parse` and `node stat` times from -d stats). All no-ops use one ninja, built from the pinned sdist.
The naive baseline lists every object on every backend edge; it is capped at --naive-max-links links (its
per-edge cost does not depend on how many links there are) and compared per backend edge.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bench import graph_tool, naive, ninja_tools, prereqs, results
from bench.fsio import ninja_files, remove, write_if_changed, write_workspace
from bench.measure import BenchError, Sample, progress, ratio, run
from bench.subjects import synth
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render

FULL_SIZES = ((100, 1000), (1000, 1000))
QUICK_SIZES = ((10, 100),)
BACKEND_RULES = {"gn_thinlto_backend", "backend"}
# CFI and whole-program devirtualization off: the example toolchain turns them on as Chromium's official builds
# do, and both need the thin link's regular-LTO part, so the null-index mode would leave every test to GN.
# Every mode, GN alone included, uses the same arguments.
GN_ARGS = "is_cfi=false use_whole_program_vtables=false"
# The naive baseline lists every object of a link on each of its backend edges: quadratic in the link's size.
NAIVE_MAX_PATHS = 50_000_000


@dataclass(frozen=True)
class Row:
    workspace: str
    mode: str  # gn | graph | null_index | naive
    links: int
    gen_s: float | None  # gn gen (GN alone / the GN part)
    hook_s: float | None  # our hook alone
    hook_rss_mib: float | None
    ninja_files: int
    ninja_bytes: int
    edges: int
    backend_edges: int
    noop_s: float
    noop_rss_mib: float
    parse_ms: float
    stat_ms: float

    def per_edge(self, value: float) -> float | None:
        return value / self.backend_edges if self.backend_edges else None


def _stats(output: str) -> dict[str, float]:
    """ninja -d stats: metric name -> total ms."""
    found = {}
    for line in output.splitlines():
        parts = [p.strip() for p in line.split("\t") if p.strip()]
        if len(parts) == 4 and parts[0] in (".ninja parse", "node stat"):
            found[parts[0]] = float(parts[3])
    return found


def noop(ninja: Path, out_dir: Path, repeat: int) -> tuple[float, float, float, float]:
    """Median wall, max RSS, median parse ms and stat ms of `ninja -d stats` on a built directory."""
    samples: list[Sample] = []
    for _ in range(repeat):
        s = run([str(ninja), "-C", str(out_dir), "-d", "stats"])
        if "no work to do" not in s.output:
            why = run([str(ninja), "-C", str(out_dir), "-n", "-d", "explain"], check=False).output.splitlines()[:3]
            raise BenchError(f"{out_dir}: no-op expected after mark_built, ninja has work: {' | '.join(why)}")
        samples.append(s)
    stats = [_stats(s.output) for s in samples]
    return (statistics.median(s.wall_s for s in samples), max(s.max_rss_mib for s in samples),
            statistics.median(s.get(".ninja parse", 0.0) for s in stats),
            statistics.median(s.get("node stat", 0.0) for s in stats))


def measure_dir(ws_name: str, mode: str, links: int, out_dir: Path, tools: ninja_tools.NinjaTools, repeat: int,
                gen_s: float | None, hook: Sample | None) -> Row:
    files = ninja_files(out_dir)
    run([str(tools.mark_built)], cwd=out_dir)
    wall, rss, parse_ms, stat_ms = noop(tools.ninja, out_dir, repeat)
    backends = sum(n for rule, n in files.edges_by_rule.items() if rule in BACKEND_RULES)
    return Row(ws_name, mode, links, gen_s, hook and hook.wall_s, hook and hook.max_rss_mib, files.files, files.bytes, files.edges, backends,
               wall, rss, parse_ms, stat_ms)


def bench_workspace(ws: synth.Workspace, work: Path, tools: ninja_tools.NinjaTools, repeat: int,
                    naive_max_links: int, keep: bool, hook_timeout_s: int | None,
                    failures: list[str], rows: list[Row], save: Callable[[], None]) -> None:
    """Every mode on WS, appended to ROWS and saved after each (a long run killed late keeps what it measured);
    a mode that fails (e.g. the hook over its time or memory limit) is noted in FAILURES."""
    root = write_workspace(ws, work / ws.name / "src")
    out = work / ws.name / "out_gn"
    remove(out)
    gen = graph_tool.gn_gen(out, root, GN_ARGS)
    rows.append(measure_dir(ws.name, "gn", len(ws.links), out, tools, repeat, gen.wall_s, None))
    save()
    out = work / ws.name / "out_naive"
    remove(out)
    capped = ws.links[:naive_max_links]
    if sum(len(link.objects) ** 2 for link in capped) <= NAIVE_MAX_PATHS:
        write_if_changed(out / "build.ninja", naive.ninja_text(capped, "../src/"))
        rows.append(measure_dir(ws.name, "naive", len(capped), out, tools, repeat, None, None))
        save()
    else:
        progress(f"  {ws.name}: no naive baseline (its links of up to {max(len(x.objects) for x in capped):,} "
                 f"objects would name more than {NAIVE_MAX_PATHS:,} paths)")
    if graph_tool.available() is None:
        config = work / ws.name / "null_index.yaml"
        write_if_changed(config, graph_tool.NULL_INDEX_CONFIG)
        for mode, cfg in (("graph", None), ("null_index", config)):
            out = work / ws.name / f"out_{mode}"
            remove(out)
            try:
                gn, hook = graph_tool.gen_with_graph(out, root, GN_ARGS, config=cfg, timeout_s=hook_timeout_s)
                rows.append(measure_dir(ws.name, mode, len(ws.links), out, tools, repeat, gn.wall_s, hook))
            except BenchError as e:
                timed_out = " exited 124" in str(e)
                failures.append(f"{ws.name} {mode}: " + (f"the hook did not finish within {hook_timeout_s} s"
                                                        if timed_out else str(e)[:400]))
                progress(f"  {failures[-1]}")
            save()
            if not keep:
                remove(out)  # a 1,000 x 1,000 graph directory holds millions of files
    if not keep:
        for mode in ("gn", "graph", "null_index", "naive"):
            remove(work / ws.name / f"out_{mode}")


def chromium_workspace(objects: int) -> synth.Workspace:
    """synth.chromium at OBJECTS objects, its link counts scaled down with it below 40,000 (--quick)."""
    f = min(1.0, objects / 40_000)
    return synth.chromium(objects=objects, tests=max(4, round(300 * f)), shared_libs=max(2, round(24 * f)),
                          tools=max(2, round(174 * f)), big_tests=max(1, round(6 * f)))


def table(rows: Sequence[Row]) -> str:
    headers = ["workspace/mode", "links", "gen s", "hook s", "ninja MB", "edges", "backends", "no-op s",
               "RSS MiB", "parse ms", "stat ms", "parse µs/be", "RSS KiB/be"]
    body = [[f"{r.workspace} {r.mode}", r.links, r.gen_s, r.hook_s, r.ninja_bytes / 2**20, r.edges, r.backend_edges,
             r.noop_s, r.noop_rss_mib, r.parse_ms, r.stat_ms,
             r.per_edge(r.parse_ms * 1000), r.per_edge(r.noop_rss_mib * 1024)] for r in rows]
    return render(headers, body)


def ratios(rows: Sequence[Row]) -> list[dict[str, object]]:
    """Per workspace: our per-backend-edge parse time and RSS over the naive baseline's (when measured); hook
    time over ninja's parse of the files it wrote; hook peak RSS over ninja's in the no-op."""
    out = []
    for ws in dict.fromkeys(r.workspace for r in rows):
        by = {r.mode: r for r in rows if r.workspace == ws}
        nv = by.get("naive")
        for mode in ("graph", "null_index"):
            r = by.get(mode)
            if r is None or "gn" not in by:
                continue
            out.append({
                "workspace": ws, "mode": mode,
                "parse_per_backend_vs_naive": nv and ratio(r.per_edge(r.parse_ms), nv.per_edge(nv.parse_ms)),
                "rss_per_backend_vs_naive": nv and ratio(r.per_edge(r.noop_rss_mib), nv.per_edge(nv.noop_rss_mib)),
                "hook_s_vs_ninja_parse_s": ratio(r.hook_s, r.parse_ms / 1000),
                "hook_rss_vs_ninja_rss": ratio(r.hook_rss_mib, r.noop_rss_mib),
                "noop_vs_gn_alone": ratio(r.noop_s, by["gn"].noop_s),
                "ninja_bytes_vs_gn_alone": ratio(r.ninja_bytes, by["gn"].ninja_bytes),
            })
    return out


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES} and a small mix")
    p.add_argument("--sizes", help="M×N grids as M:N,M:N ('' for none; default: 100:1000,1000:1000)")
    p.add_argument("--mix", default="20:40", help="Chromium-like mix as COMPONENTS:OBJECTS_EACH ('' to skip)")
    p.add_argument("--chromium", type=int, default=0, metavar="OBJECTS",
                   help="also the Chromium-shaped workspace of about OBJECTS objects (bench.subjects.synth.chromium)")
    p.add_argument("--naive-max-links", type=int, default=20, help="cap on the naive baseline's links")
    p.add_argument("--repeat", type=int, default=3, help="no-op runs per directory (median)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--keep", action="store_true", help="keep the build directories")
    p.add_argument("--hook-timeout", type=int, default=1200, help="seconds one hook run may take (%(default)s)")
    p.add_argument("--name", default="scale", help="results file name (the report shows scale and scale-large)")
    args = p.parse_args(argv)
    prereqs.ensure()
    if args.sizes is not None:  # '' for no grid
        sizes = tuple(tuple(int(x) for x in s.split(":")) for s in args.sizes.split(",") if s)
    else:
        sizes = QUICK_SIZES if args.quick else FULL_SIZES
    mix = args.mix if not args.quick or args.mix != "20:40" else "4:10"
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    tools = ninja_tools.build(args.cache)
    workspaces = [synth.grid(m, n) for m, n in sizes]
    if mix:
        c, n = (int(x) for x in mix.split(":"))
        workspaces.append(synth.mix(components=c, per_component=n))
    if args.chromium:
        workspaces.append(chromium_workspace(args.chromium))
    rows: list[Row] = []
    failures: list[str] = []
    note = graph_tool.available()
    command = "python -m bench scale" + (" --quick" if args.quick else "") + \
        (f" --sizes '{args.sizes}'" if args.sizes is not None else "") + (f" --mix '{args.mix}'" if args.mix != "20:40" else "") + \
        (f" --chromium {args.chromium}" if args.chromium else "") + (f" --name {args.name}" if args.name != "scale" else "")

    def save() -> Path:
        order = {"gn": 0, "graph": 1, "null_index": 2, "naive": 3}
        names = [w.name for w in workspaces]
        done = sorted(rows, key=lambda r: (names.index(r.workspace), order[r.mode]))
        return results.write(args.results, args.name, dict(
            ctx, rows=done, ratios=ratios(done), ninja=f"{tools.version} (sdist build)", source=graph_tool.source_state(),
            graph_missing=note, failures=failures, command=command))

    for ws in workspaces:
        bench_workspace(ws, args.cache / "scale", tools, args.repeat, args.naive_max_links, args.keep,
                        args.hook_timeout, failures, rows, save)
        progress(table([r for r in rows if r.workspace == ws.name]))
    path = save()
    rat = results.read(args.results, args.name)["ratios"]
    print(render(["workspace", "mode", "parse/be vs naive", "RSS/be vs naive", "hook/parse", "no-op vs GN",
                  "bytes vs GN"],
                 [[r[k] for k in ("workspace", "mode", "parse_per_backend_vs_naive", "rss_per_backend_vs_naive",
                                  "hook_s_vs_ninja_parse_s", "noop_vs_gn_alone", "ninja_bytes_vs_gn_alone")] for r in rat]))
    if note:
        print(f"not measured: GN + our graph, null-index mode: {note}")
    print(f"results: {path}")
    return 0
