"""`python -m bench dtlto`: ninja_test's link (ninja's own CMake build, clang/lld 22 ThinLTO) with lld's
in-process backends against goma-ext as lld's DTLTO distributor, side by side in one run.

(`--project libdeflate` times libdeflate's `programs/benchmark` link instead: a small run for the tests.)

Rows: (a) lld in-process; (b) goma-ext local (a cold backend cache each time); (c) goma-ext remote on the local
cluster, cold (a new cache salt each time, no local backend cache); (d) remote from a fresh build directory
with (c)'s salt, where only the timed link's inputs are built: the action cache should serve every job, members
of bitcode archives (which lld extracts to files named after its pid) and the jobs importing from them included.
Each link is timed alone (`ninja ninja_test` after removing the binary), its median of --repeat runs;
peak RSS is the largest process of the link's tree. The binaries pass the project's tests; (d)'s, a run of the
timed binary itself (ninja_test; libdeflate's benchmark program checks every chunk it decompresses). (a)'s
binaries are kept in CACHE/dtlto-bench/PROJECT/in-process for comparing their code with the other variants' (the
results name that directory and the build directory those relink).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import cluster_tool, prereqs, results
from bench.fsio import remove
from bench.measure import BenchError, Sample, progress, ratio, run
from bench.subjects import cmake_projects
from bench.subjects.cmake_projects import CMakeProject
from bench.subjects.sdists import DEFAULT_CACHE
from bench.table import render
from gn_thinlto.analysis import graph_query
from goma_ext.remote import stats

COLUMNS = ["variant", "link wall s", "vs (a)", "peak RSS MiB", "vs (a)", "jobs", "executed remotely",
           "action-cache hits", "local", "fallbacks", "uploaded MiB", "the project's tests"]


def _prepared(project: CMakeProject, build: Path, link_flags: str, extra: Sequence[str],
              only_timed: bool = False) -> Path:
    """BUILD configured with LINK_FLAGS (and EXTRA cmake arguments) and built, so that only the timed link is left
    to run (ONLY_TIMED: only its inputs are built, not the project's other targets). The compile flags are the
    same in every variant: configuring an existing BUILD for another variant relinks and compiles nothing."""
    cmake_projects.configure(project, build, link_flags, extra=extra)
    targets = _link_inputs(build, project.bench_target) if only_timed else project.targets
    cmake_projects.build(build, *targets, env={"GOMA_EXT_DTLTO": "--no-cache"})
    return build


def _link_inputs(build: Path, target: str) -> list[str]:
    """The inputs of the edge that links TARGET in BUILD (`ninja -t query`)."""
    text = run(["ninja", "-C", str(build), "-t", "query", target]).output
    nodes = [n for n in graph_query.parse_query(text) if n.path == target]
    if not nodes or not nodes[0].inputs:
        raise BenchError(f"ninja -t query {target} in {build}: no inputs")
    return list(nodes[0].inputs)


def _keep_binaries(project: CMakeProject, build: Path, dest: Path) -> Path:
    """DEST with a copy of PROJECT's binaries as BUILD has them (paths kept): (a)'s, which the later variants'
    relinks of BUILD replace, kept for comparing their code (tests/integration/test_bench_dtlto.py)."""
    remove(dest)
    for name in project.binaries:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / name, dest / name)
    return dest


def _time_link(project: CMakeProject, build: Path,
               env: Mapping[str, str] | None) -> tuple[Sample, list[stats.RunRecord]]:
    log = build / "goma_ext_dtlto.jsonl"
    before = len(stats.read(log))
    (build / project.bench_target).unlink(missing_ok=True)  # (d)'s directory has never linked it
    sample = cmake_projects.build(build, project.bench_target, env=env)
    return sample, stats.read(log)[before:]


def _row(project: CMakeProject, name: str, samples: list[tuple[Sample, list[stats.RunRecord]]],
         build: Path, check: Callable[[CMakeProject, Path], str] = cmake_projects.test) -> dict[str, Any]:
    walls = [s.wall_s for s, _ in samples]
    last = stats.summarize(samples[-1][1])
    modes = last["modes"]
    return {
        "variant": name, "wall_s": statistics.median(walls), "walls_s": walls,
        "rss_mib": statistics.median(s.max_rss_mib for s, _ in samples),
        "jobs": last["runs"], "remote": modes["remote"], "action_cache_hits": modes["cache_hit"],
        "local": modes["local"] + modes["backend_cache"], "fallbacks": modes["fallback"],
        "uploaded_mib": last["bytes_uploaded"] / 2**20, "test": check(project, build),
    }


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench dtlto", description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3, help="links timed per variant (medians reported)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--name", default="dtlto")
    p.add_argument("--no-remote", action="store_true", help="rows (a) and (b) only")
    p.add_argument("--project", choices=sorted(cmake_projects.PROJECTS), default="ninja")
    p.add_argument("--opt", type=int, choices=(1, 2, 3), default=3,
                   help="compile at -O1, -O2 or CMake Release's -O3 (the default; the smoke test builds at -O1)")
    args = p.parse_args(argv)
    extra = cmake_projects.release_at(args.opt)  # always given: a build directory of another level is reconfigured
    project = cmake_projects.PROJECTS[args.project]
    prereqs.ensure()
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    work = args.cache / "dtlto-bench" / args.project
    dist = cmake_projects.distributor_flags()
    rows = []
    progress(f"(a) lld in-process: building {args.project}'s sources")
    inproc = _prepared(project, work / "build", "", extra)
    rows.append(_row(project, "(a) lld in-process", [_time_link(project, inproc, None) for _ in range(args.repeat)],
                     inproc))
    reference = _keep_binaries(project, inproc, work / "in-process")
    progress("(b) goma-ext local")
    local = _prepared(project, work / "build", dist, extra)  # (a)'s objects, linked again
    samples = [_time_link(project, local, {"GOMA_EXT_DTLTO": f"--cache={work / f'local-cache-{i}-{os.getpid()}'}"})
               for i in range(args.repeat)]
    for i in range(args.repeat):
        remove(work / f"local-cache-{i}-{os.getpid()}")
    rows.append(_row(project, "(b) goma-ext local", samples, local))
    missing = None if not args.no_remote else "--no-remote"
    missing = missing or cluster_tool.available()
    if missing is None:
        state = work / "cluster"
        endpoint = cluster_tool.start(state)
        try:
            rows += _remote_rows(project, local, work / "fresh", dist, extra, endpoint, args.repeat)
        finally:
            cluster_tool.stop(state)
    base = rows[0]
    for r in rows:
        r["wall_vs_a"], r["rss_vs_a"] = ratio(r["wall_s"], base["wall_s"]), ratio(r["rss_mib"], base["rss_mib"])
    print(render(COLUMNS, table_rows(rows)))
    if missing:
        print(f"remote rows not measured: {missing}")
    command = "python -m bench dtlto" + (f" {' '.join(argv)}" if argv else "")
    path = results.write(args.results, args.name, {**ctx, "command": command, "project": args.project, "opt": args.opt,
                                                   "target": project.bench_target, "rows": rows,
                                                   "remote_missing": missing, "in_process_binaries": str(reference),
                                                   "build_dir": str(local)})
    print(f"results: {path}")
    return 0


def _remote_rows(project: CMakeProject, cold: Path, fresh: Path, dist: str, extra: Sequence[str], endpoint: str,
                 repeat: int) -> list[dict[str, Any]]:
    """(c) in COLD, (b)'s build directory; (d) in FRESH, another path, where only the timed link's inputs are
    built from scratch."""
    progress("(c) goma-ext remote, cold")
    salts = [f"dtlto-bench-{os.getpid()}-{i}" for i in range(repeat)]
    remote = f"--no-cache --remote={endpoint}"
    samples = [_time_link(project, cold, {"GOMA_EXT_DTLTO": remote, "GOMA_EXT_CACHE_SALT": s}) for s in salts]
    rows = [_row(project, "(c) goma-ext remote, cold", samples, cold)]
    progress("(d) goma-ext remote, fresh build directory")
    remove(fresh)
    _prepared(project, fresh, dist, extra, only_timed=True)
    samples = [_time_link(project, fresh, {"GOMA_EXT_DTLTO": remote, "GOMA_EXT_CACHE_SALT": salts[-1]})
               for _ in range(repeat)]
    rows.append(_row(project, "(d) goma-ext remote, fresh directory", samples, fresh,
                     cmake_projects.check_bench_target))
    return rows


def table_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[Any]]:
    return [[r["variant"], r["wall_s"], r["wall_vs_a"], r["rss_mib"], r["rss_vs_a"], r["jobs"], r["remote"],
             r["action_cache_hits"], r["local"], r["fallbacks"], r["uploaded_mib"], r["test"]] for r in rows]
