"""`python -m bench builds`: clean and incremental builds of the example and of ninja's sources, side by side.

Variants (bench/variants.py): (a) in-process ThinLTO (lld, --thinlto-jobs=all, i.e. one per core),
(b) (a) with --thinlto-cache-dir, (c) our graph locally, (d) our graph with remote backends (when available).
Per variant: clean build wall/CPU time; the peak RSS of link-phase processes (replayed one by one after the
build: the in-process LTO link for a/b, the thin link and the final link for c); then three incremental
cases, each an edit applied to the shared source tree and built by every variant in turn: a comment-only
edit and a function-body edit in a widely imported .cc, and a touch of a leaf .cc. Clean builds and each
incremental case are repeated (--repeat, default 3; the variants interleaved; a fresh comment, a new
statement, another touch each time) and the run with the median wall time is reported.
Backend jobs run: (a) modules the relinked links compile (counted once per link by replaying it with an
empty lld cache), (b) new lld cache entries, (c) compiler runs logged by our backend step (cache misses).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import cluster_tool, prereqs, results, subjects, variants
from bench.fsio import remove
from bench.measure import Sample, progress, ratio, run
from bench.subjects import Subject
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render
from bench.variants import Variant
from gn_thinlto.plan.links import inner_command
from gn_thinlto.render.ninja import THIN_LINK_STEP
from gn_thinlto.steps import partitions

CASES = ("comment", "body", "leaf")
LINK_WORDS = ("LINK", "SOLINK")
LLD = "/usr/lib/llvm-19/bin/ld.lld"


@dataclass(frozen=True)
class Build:
    subject: str
    variant: str
    case: str  # clean | comment | body | leaf
    wall_s: float
    cpu_s: float
    max_rss_mib: float
    gen_s: float | None
    edges: int
    backend_jobs: int
    backend_cache_hits: int
    relinked: int
    wall_samples: tuple[float, ...] = ()  # every repetition's wall time (this build is the median one)
    thin_link_s: float | None = None  # (c)-like: seconds of every thin-link edge the build ran, summed
    longest_thin_link: tuple[str, float] | None = None  # its longest thin-link edge: (target directory, seconds)
    partition_s: float | None = None  # seconds of every partition edge the build ran, summed


@dataclass(frozen=True)
class LinkRss:
    subject: str
    variant: str
    binary: str
    thin_link_mib: float | None
    link_mib: float
    modules: int | None


def ninja(out_dir: Path, env: dict[str, str] | None = None) -> Sample:
    return run(["ninja", "-C", str(out_dir), "-d", "keeprsp"], env=env)


def link_outputs(edges: Sequence[tuple[str, str]]) -> list[str]:
    return sorted({os.path.normpath(out) for word, out in edges if word in LINK_WORDS})


def commands(out_dir: Path, target: str, final_only: bool) -> list[str]:
    flags = ["-s"] if final_only else []
    return run(["ninja", "-C", str(out_dir), "-t", "commands", *flags, target]).output.splitlines()


def linker_command(driver_command: str, out_dir: Path) -> list[str]:
    """The ld.lld command line the clang driver would run (`-###`), so lld is measured alone; a link
    wrapper's clang command (`python3 link_wrapper.py … -- clang++ …`) is asked, not the wrapper."""
    tokens = shlex.split(driver_command)
    start, end = inner_command(tokens)
    s = run([*tokens[start:end], "-###"], cwd=out_dir)
    lines = [l for l in s.output.splitlines() if l.startswith(' "') and "ld.lld" in l.split('" ')[0]]
    if not lines:
        raise ValueError(f"no ld.lld command in the -### output of {driver_command[:120]}")
    return shlex.split(lines[-1])


def thin_link_argv(manifest: dict[str, object], out_dir: Path) -> list[str]:
    """The thin link's command as its step last ran it: with --lto-emit-llvm when the module was split."""
    argv = list(manifest["argv"])  # type: ignore[call-overload]
    record = out_dir / str(manifest.get("partition_dir") or "-") / partitions.RECORD
    if record.is_file() and json.loads(record.read_text()).get("module_bytes") is not None:
        argv.append(partitions.EMIT_MODULE)
    return argv


def replay_links(subject: Subject, variant: Variant, out_dir: Path, binaries: Sequence[str]) -> list[LinkRss]:
    """Run each binary's ld.lld processes again, alone, measuring their peak RSS.

    (a): the in-process ThinLTO link, with an empty --thinlto-cache-dir whose entries count the modules it
    compiles; (c): the thin link (its lld command from the step's manifest) and the final native link."""
    rows = []
    for binary in binaries:
        final = linker_command(commands(out_dir, binary, final_only=True)[-1], out_dir)
        if variant in (Variant.IN_PROCESS, Variant.LLD_CACHE):
            with tempfile.TemporaryDirectory(dir=out_dir) as cache:
                s = run([*final, f"--thinlto-cache-dir={cache}"], cwd=out_dir)
                modules = sum(1 for _ in Path(cache).glob("llvmcache-*"))
            rows.append(LinkRss(subject.name, variant.value, binary, None, s.max_rss_mib, modules))
        else:
            thin_rss = None
            for c in commands(out_dir, binary, final_only=False):
                if f"/{THIN_LINK_STEP}.py " in c:
                    manifest = json.loads((out_dir / shlex.split(c)[-1]).read_text())
                    lld = linker_command(shlex.join(thin_link_argv(manifest, out_dir)), out_dir)
                    thin_rss = max(thin_rss or 0.0, run(lld, cwd=out_dir).max_rss_mib)
            s = run(final, cwd=out_dir)
            rows.append(LinkRss(subject.name, variant.value, binary, thin_rss, s.max_rss_mib, None))
    return rows


def measured_build(subject: Subject, variant: Variant, out_dir: Path, case: str, gen_s: float | None,
                   modules: dict[str, int], salt: str = "") -> Build:
    before = variants.counters(out_dir)
    log_line = variants.ninja_log_lines(out_dir)
    s = ninja(out_dir, variants.build_env(variant, salt))
    after = variants.counters(out_dir)
    edges = variants.edges_run(s.output)
    relinked = link_outputs(edges)
    hits = 0
    if variant is Variant.IN_PROCESS:
        jobs = sum(modules.get(b, 0) for b in relinked)
    elif variant is Variant.LLD_CACHE:
        jobs = after.lld_cache_entries - before.lld_cache_entries
    elif variant.is_graph_local:
        jobs, hits = variants.backend_log_misses(out_dir, before)
    else:
        jobs, hits = variants.remote_log_counts(out_dir, before)
    thin: dict[str, float] = {}
    partition_s = None
    if variant not in (Variant.IN_PROCESS, Variant.LLD_CACHE):
        thin, partition_s = variants.thin_link_times(out_dir, log_line)
    longest = max(thin.items(), key=lambda kv: kv[1]) if thin else None
    return Build(subject.name, variant.value, case, s.wall_s, s.cpu_s, s.max_rss_mib, gen_s, len(edges), jobs, hits,
                 len(relinked), thin_link_s=sum(thin.values()) if thin else None, longest_thin_link=longest,
                 partition_s=partition_s)


def median_build(samples: Sequence[Build]) -> Build:
    """The repetition with the median wall time (the upper one of an even count), carrying every wall time."""
    ordered = sorted(samples, key=lambda b: b.wall_s)
    return dataclasses.replace(ordered[len(ordered) // 2], wall_samples=tuple(b.wall_s for b in samples))


def bench_subject(subject: Subject, chosen: Sequence[Variant], work: Path, log: list[str],
                  endpoint: str | None = None, base_salt: str = "", repeat: int = 1,
                  partitions: int = 0) -> tuple[list[Build], list[LinkRss]]:
    outs = {v: work / subject.name / f"out_{v.value}" for v in chosen}
    builds: list[Build] = []
    rss: list[LinkRss] = []
    modules: dict[str, int] = {}
    cleans: dict[Variant, list[Build]] = {v: [] for v in chosen}
    salt = base_salt
    for rep in range(repeat):  # interleaved, so a drift in the machine's speed hits every variant alike
        salt = f"{base_salt}-{rep}"  # (d): every clean build starts from a cold action cache
        for v in chosen:
            remove(outs[v])
            gen_s = variants.configure(v, outs[v], subject.root, subject.gn_args, endpoint, partitions)
            cleans[v].append(measured_build(subject, v, outs[v], "clean", gen_s, {}, salt))
    for v in chosen:
        b = median_build(cleans[v])
        log.append(f"{subject.name} {v.title} clean: {subjects.check(subject, outs[v])}")
        binaries = _binaries(subject, outs[v])
        if v in (Variant.IN_PROCESS, Variant.GRAPH, Variant.NO_PARTITIONS):
            rows = replay_links(subject, v, outs[v], binaries)
            rss += rows
            if v is Variant.IN_PROCESS:
                modules = {r.binary: r.modules or 0 for r in rows}
                b = measured_build_jobs(b, sum(modules.values()))
        builds.append(b)
        walls = ", ".join(f"{x:.1f}" for x in b.wall_samples)
        progress(f"  {subject.name} {v.title}: clean {b.wall_s:.1f}s (of {walls})")
    for case in CASES:
        samples: dict[Variant, list[Build]] = {v: [] for v in chosen}
        for _ in range(repeat):
            {"comment": subject.edit_comment, "body": subject.edit_body, "leaf": subject.touch_leaf}[case]()
            for v in chosen:
                samples[v].append(measured_build(subject, v, outs[v], case, None, modules, salt))
        for v in chosen:
            b = median_build(samples[v])
            builds.append(b)
            walls = ", ".join(f"{x:.1f}" for x in b.wall_samples)
            progress(f"  {subject.name} {v.title}: {case} {b.wall_s:.1f}s (of {walls}), {b.backend_jobs} backend jobs")
    for v in chosen:
        log.append(f"{subject.name} {v.title} after the edits: {subjects.check(subject, outs[v])}")
    return builds, rss


def measured_build_jobs(b: Build, jobs: int) -> Build:
    return dataclasses.replace(b, backend_jobs=jobs)


def _binaries(subject: Subject, out_dir: Path) -> list[str]:
    """Every executable and shared library GN builds (output paths relative to OUT_DIR)."""
    found = []
    for kind in ("executable", "shared_library"):
        found += run(["gn", "ls", str(out_dir), f"--type={kind}", "--as=output"], cwd=subject.root).output.split()
    return sorted(os.path.normpath(f) for f in found)


def ratios(builds: Sequence[Build], rss: Sequence[LinkRss]) -> list[dict[str, object]]:
    out = []
    for subject in dict.fromkeys(b.subject for b in builds):
        by = {(b.variant, b.case): b for b in builds if b.subject == subject}
        peak = {}
        for r in rss:
            if r.subject == subject:
                peak[r.variant] = max(peak.get(r.variant, 0.0), r.link_mib, r.thin_link_mib or 0.0)
        for case in ("clean",) + CASES:
            a, b, c, d, e, f = (by.get((v, case)) for v in "abcdef")
            out.append({
                "subject": subject, "case": case,
                "c_vs_a_wall": ratio(c and c.wall_s, a and a.wall_s),
                "c_vs_b_wall": ratio(c and c.wall_s, b and b.wall_s),
                "a_vs_c_speedup": ratio(a and a.wall_s, c and c.wall_s),
                "c_vs_a_cpu": ratio(c and c.cpu_s, a and a.cpu_s),
                "d_vs_a_wall": ratio(d and d.wall_s, a and a.wall_s),
                "d_vs_c_wall": ratio(d and d.wall_s, c and c.wall_s),
                "e_vs_c_wall": ratio(e and e.wall_s, c and c.wall_s),
                "e_vs_a_wall": ratio(e and e.wall_s, a and a.wall_s),
                "c_vs_f_wall": ratio(c and c.wall_s, f and f.wall_s),
                "c_vs_f_thin_link": ratio(c and c.thin_link_s, f and f.thin_link_s),
            })
        out.append({"subject": subject, "case": "peak link-phase RSS", "c_vs_a_rss": ratio(peak.get("c"), peak.get("a"))})
    return out


def tables(builds: Sequence[Build], rss: Sequence[LinkRss]) -> str:
    t1 = render(["subject/case/variant", "wall s", "CPU s", "gen s", "edges", "backend jobs", "cache hits", "relinked",
                 "thin-link s", "longest thin link s", "partition s"],
                [[f"{b.subject} {b.case} ({b.variant})", b.wall_s, b.cpu_s, b.gen_s, b.edges, b.backend_jobs,
                  b.backend_cache_hits, b.relinked, b.thin_link_s,
                  f"{b.longest_thin_link[1]:.1f} ({b.longest_thin_link[0]})" if b.longest_thin_link else None,
                  b.partition_s] for b in builds])
    t2 = render(["subject/variant/binary", "thin link MiB", "link MiB", "modules"],
                [[f"{r.subject} ({r.variant}) {r.binary}", r.thin_link_mib, r.link_mib, r.modules] for r in rss])
    return t1 + "\n\n" + t2


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench builds", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the example only")
    p.add_argument("--subjects", default="example,ninja", help="comma-separated: example, ninja, tiny, micro")
    p.add_argument("--variants", default="abc", help="letters of the variants to run (d needs the cluster)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--name", default="builds", help="results file name (the report also shows builds-quiet)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each clean build and incremental case (median)")
    p.add_argument("--partitions", type=int, default=0,
                   help="lto_partitions of the graph variants but (f) (default: the config's default, auto)")
    args = p.parse_args(argv)
    prereqs.ensure()
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    chosen = [Variant(x) for x in args.variants]
    names = ["example"] if args.quick else args.subjects.split(",")
    builds: list[Build] = []
    rss: list[LinkRss] = []
    checks: list[str] = []
    endpoint = None
    remote_missing = cluster_tool.available() if Variant.REMOTE in chosen else ""
    if remote_missing:
        print(f"not measured: (d) {remote_missing}")
        chosen.remove(Variant.REMOTE)
    elif Variant.REMOTE in chosen:
        endpoint = cluster_tool.start(args.cache / "cluster")
    salt = f"bench-{time.time_ns()}"  # cold action cache for this run (the CAS may hold blobs of earlier runs)
    try:
        for name in names:
            subject = subjects.SUBJECTS[name](args.cache)
            b, r = bench_subject(subject, chosen, args.cache / "builds", checks, endpoint, salt, max(1, args.repeat),
                                 args.partitions)
            builds += b
            rss += r
    finally:
        if endpoint is not None:
            cluster_tool.stop(args.cache / "cluster")
    print(tables(builds, rss))
    rat = ratios(builds, rss)
    print(render(["subject", "case", *(h for h, _ in variants.RATIO_COLUMNS)],
                 [[r["subject"], r["case"], *(r.get(k) for _, k in variants.RATIO_COLUMNS)] for r in rat]))
    floor = run([LLD, "--version"]).max_rss_mib
    print(f"ld.lld --version alone (libLLVM mapped, no work): {floor:.1f} MiB")
    print("\n".join(checks))
    command = "python -m bench builds" + (" --quick" if args.quick else "") + \
        ("" if args.subjects == "example,ninja" else f" --subjects {args.subjects}") + \
        ("" if args.variants == "abc" else f" --variants {args.variants}") + \
        ("" if args.name == "builds" else f" --name {args.name}") + \
        ("" if args.repeat == 3 else f" --repeat {args.repeat}") + \
        (f" --partitions {args.partitions}" if args.partitions else "")
    path = results.write(args.results, args.name, dict(ctx, builds=builds, link_rss=rss, ratios=rat, checks=checks, lld_floor_mib=floor,
                                                      command=command, remote_missing=remote_missing))
    print(f"results: {path}")
    return 0
