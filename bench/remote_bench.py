"""`python -m bench remote`: backends on the local REAPI cluster (2 workers) vs locally.

Per subject, three clean builds of our graph in fresh directories: (c) local; (d1) remote, cold action cache
(a fresh cache salt); (d2) remote again from another fresh directory with the same salt. Reported from
goma-ext's stats log: bytes uploaded vs the naive approach (every backend uploading every bitcode object of
its link), the action-cache hit rate of d2, and the per-action overhead: the mean backend edge duration
(ninja's .ninja_log) remote minus local, and remote over local.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import cluster_tool, graph_tool, prereqs, results, subjects, variants
from bench.fsio import remove
from bench.measure import progress, ratio, run
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render
from bench.variants import Variant


@dataclass(frozen=True)
class Row:
    subject: str
    build: str  # c | d1 | d2
    wall_s: float
    actions: int
    remote_executions: int
    cache_hits: int
    local_fallbacks: int
    bytes_uploaded: int
    input_bytes: int
    naive_upload_bytes: int | None
    mean_backend_ms: float


def one_build(subject: subjects.Subject, variant: Variant, out: Path, endpoint: str | None, salt: str, tag: str,
              env: Mapping[str, str] | None = None) -> Row:
    """One clean build; `env` adds to the build's environment (e.g. GOMA_EXT_PROXY=off)."""
    remove(out)
    variants.configure(variant, out, subject.root, subject.gn_args, endpoint)
    s = run(["ninja", "-C", str(out)], env={**(variants.build_env(variant, salt) or {}), **(env or {})})
    subjects.check(subject, out)
    durations = variants.backend_durations_ms(out)
    mean = statistics.mean(durations) if durations else 0.0
    if variant is Variant.GRAPH:
        return Row(subject.name, tag, s.wall_s, len(durations), 0, 0, 0, 0, 0, None, mean)
    rep = cluster_tool.report(out)
    return Row(subject.name, tag, s.wall_s, rep["runs"], rep["remote_executions"], rep["cache_hits"],
               rep["local_fallbacks"], rep["bytes_uploaded"], rep["input_bytes"], rep["naive_upload_bytes"], mean)


def ratios(rows: Sequence[Row]) -> list[dict[str, object]]:
    out = []
    for subject in dict.fromkeys(r.subject for r in rows):
        by = {r.build: r for r in rows if r.subject == subject}
        c, d1, d2 = by.get("c"), by.get("d1"), by.get("d2")
        out.append({
            "subject": subject,
            "uploaded_vs_naive": ratio(d1 and d1.bytes_uploaded, d1 and d1.naive_upload_bytes),
            "inputs_vs_naive": ratio(d1 and d1.input_bytes, d1 and d1.naive_upload_bytes),
            "d2_cache_hit_rate": ratio(d2 and d2.cache_hits, d2 and d2.actions),
            "per_action_overhead_ms": (d1.mean_backend_ms - c.mean_backend_ms) if c and d1 else None,
            "per_action_remote_vs_local": ratio(d1 and d1.mean_backend_ms, c and c.mean_backend_ms),
            "clean_d1_vs_c_wall": ratio(d1 and d1.wall_s, c and c.wall_s),
        })
    return out


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench remote", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="the example only")
    p.add_argument("--subjects", default="example,ninja", help="comma-separated: example, ninja, tiny, micro")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    prereqs.ensure()
    ctx = results.context()
    command = "python -m bench remote" + (" --quick" if args.quick else "")
    print(f"machine: {ctx['machine'].one_line()}")
    missing = graph_tool.available() or cluster_tool.available()
    if missing:
        print(f"not measured: {missing}")
        results.write(args.results, "remote", dict(ctx, rows=[], missing=missing, command=command))
        return 0
    names = ["example"] if args.quick else args.subjects.split(",")
    salt = f"bench-{time.time_ns()}"
    state = args.cache / f"cluster-{salt}"  # a new cluster: cold CAS and action cache
    endpoint = cluster_tool.start(state)
    rows: list[Row] = []
    try:
        for name in names:
            subject = subjects.SUBJECTS[name](args.cache)
            work = args.cache / "remote" / name
            rows.append(one_build(subject, Variant.GRAPH, work / "out_c", None, salt, "c"))
            rows.append(one_build(subject, Variant.REMOTE, work / "out_d1", endpoint, salt, "d1"))
            rows.append(one_build(subject, Variant.REMOTE, work / "out_d2", endpoint, salt, "d2"))
            progress(f"  {name}: done")
    finally:
        cluster_tool.stop(state)
        remove(state)
    print(render(["subject/build", "wall s", "actions", "remote", "cache hits", "fallbacks", "uploaded B", "inputs B",
                  "naive B", "mean backend ms"],
                 [[f"{r.subject} {r.build}", r.wall_s, r.actions, r.remote_executions, r.cache_hits, r.local_fallbacks,
                   r.bytes_uploaded, r.input_bytes, r.naive_upload_bytes, r.mean_backend_ms] for r in rows]))
    rat = ratios(rows)
    print(render(["subject", "uploaded/naive", "inputs/naive", "hit rate (fresh dir)", "overhead ms/action", "remote/local per action",
                  "clean d/c"], [list(r.values()) for r in rat]))
    path = results.write(args.results, "remote", dict(ctx, rows=rows, ratios=rat, source=graph_tool.source_state(),
                                                      command=command))
    print(f"results: {path}")
    return 0
