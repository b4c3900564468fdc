"""`python -m bench report`: render the latest results (bench/results/*.json) into docs/benchmarks.md and plots.

docs/benchmarks.md is written by hand around generated blocks: the text between `<!-- bench:NAME -->` and
`<!-- /bench:NAME -->` is replaced by tables rendered from RESULTS/NAME.json; everything else (prose, the
Index decoder section) is kept. Plots (docs/bench-*.png) need matplotlib (`pip install -e .[bench]`).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench import registry, results
from bench.fsio import REPO, write_if_changed
from bench.measure import ratio
from bench.table import render
from bench.variants import RATIO_COLUMNS

DOC = REPO / "docs" / "benchmarks.md"
Data = dict[str, Any]


def _run_line(d: Data) -> str:
    m = d["machine"]
    tools = ", ".join(f"{k} {v}" for k, v in sorted(m["tools"].items()))
    busy = ", ".join(d.get("busy_at_start") or []) or "nothing above 5% CPU"
    return (f"Command: `{d.get('command', '?')}`, {d['started_utc']} – {d['finished_utc']}; {m['cpu']}, {m['cores']} cores, "
            f"{m['memory_gib']:.0f} GiB, Linux {m['kernel']}, Python {m['python']}; {tools}. Load average "
            f"{d['load_1min_at_start']:.1f} at start, {d['load_1min_at_end']:.1f} at end; busiest at start: {busy}.")


def scale_block(d: Data) -> str:
    rows = [[f"{r['workspace']} {r['mode']}", r["links"], r["gen_s"], r["hook_s"], r.get("hook_rss_mib"),
             r["ninja_bytes"] / 2**20,
             r["edges"], r["backend_edges"], r["noop_s"], r["noop_rss_mib"], r["parse_ms"], r["stat_ms"],
             ratio(r["parse_ms"] * 1000, r["backend_edges"]), ratio(r["noop_rss_mib"] * 1024, r["backend_edges"])]
            for r in d["rows"]]
    main = render(["workspace / mode", "links", "gn gen s", "hook s", "hook RSS MiB", "ninja MiB", "edges", "backend edges",
                   "no-op s", "no-op RSS MiB", "parse ms", "stat ms", "parse µs / backend", "RSS KiB / backend"],
                  rows, markdown=True)
    rat = render(["workspace", "mode", "parse / backend vs naive", "RSS / backend vs naive", "hook s / ninja parse s",
                  "hook RSS / ninja RSS", "no-op vs GN alone", "ninja bytes vs GN alone"],
                 [[r["workspace"], r["mode"], r["parse_per_backend_vs_naive"], r["rss_per_backend_vs_naive"],
                   r["hook_s_vs_ninja_parse_s"], r.get("hook_rss_vs_ninja_rss"), r["noop_vs_gn_alone"],
                   r["ninja_bytes_vs_gn_alone"]] for r in d["ratios"]],
                 markdown=True)
    missing = f"\n\nNot measured: {d['graph_missing']}." if d.get("graph_missing") else ""
    missing += "".join(f"\n\nNot measured: {f}." for f in d.get("failures", []))
    return f"{_run_line(d)} Source: {d.get('source', '?')}; no-ops timed with ninja {d.get('ninja', '?')}.\n\n{main}\n\n{rat}{missing}"


def _wall_range(b: Data | None) -> str:
    return ", ".join(f"{x:.2f}" for x in b.get("wall_samples", ())) if b else ""


def builds_block(d: Data) -> str:
    by = {(b["subject"], b["case"], b["variant"]): b for b in d["builds"]}
    variants = sorted({b["variant"] for b in d["builds"]})
    out = [_run_line(d)]
    for subject in dict.fromkeys(b["subject"] for b in d["builds"]):
        rows = []
        for case in ("clean", "comment", "body", "leaf"):
            row: list[Any] = [case]
            for v in variants:
                b = by.get((subject, case, v))
                row += [b and b["wall_s"], b and b["cpu_s"], b and b["backend_jobs"]]
            rows.append(row)
        headers = ["case"] + [f"{h} ({v})" for v in variants for h in ("wall s", "CPU s", "backend jobs")]
        out.append(f"**{subject}**\n\n" + render(headers, rows, markdown=True))
        spread = [[case, *(_wall_range(by.get((subject, case, v))) for v in variants)]
                  for case in ("clean", "comment", "body", "leaf")]
        if any(cell for row in spread for cell in row[1:]):
            out.append("Each row above is the run with the median wall time; every run's wall s:\n\n"
                       + render(["case", *(f"runs ({v})" for v in variants)], spread, markdown=True))
    rss = d.get("link_rss", [])
    peaks = []
    for subject in dict.fromkeys(r["subject"] for r in rss):
        for v in sorted({r["variant"] for r in rss if r["subject"] == subject}):
            rs = [r for r in rss if r["subject"] == subject and r["variant"] == v]
            top = max(rs, key=lambda r: max(r["link_mib"], r["thin_link_mib"] or 0))
            peaks.append([subject, v, top["binary"], top["thin_link_mib"], top["link_mib"]])
    floor = d.get("lld_floor_mib")
    out.append(render(["subject", "variant", "largest binary", "thin link lld MiB", "link lld MiB"], peaks, markdown=True)
               + (f"\n\n`ld.lld --version` alone: {floor:.1f} MiB (libLLVM mapped, no work)." if floor else ""))
    if any(b.get("thin_link_s") is not None for b in d["builds"]):  # runs from before the column have none
        out.append(render(
            ["subject/case/variant", "thin-link edges s", "longest thin-link edge s", "partition edges s"],
            [[f"{b['subject']} {b['case']} ({b['variant']})", b.get("thin_link_s"),
              f"{b['longest_thin_link'][1]:.1f} ({b['longest_thin_link'][0]})" if b.get("longest_thin_link") else None,
              b.get("partition_s")] for b in d["builds"] if b.get("thin_link_s") is not None], markdown=True))
    columns = [(h, k) for h, k in RATIO_COLUMNS if any(r.get(k) is not None for r in d["ratios"])]
    out.append(render(["subject", "case", *(h for h, _ in columns)],
                      [[r["subject"], r["case"], *(r.get(k) for _, k in columns)] for r in d["ratios"]],
                      markdown=True))
    out.append("Checks: " + "; ".join(d.get("checks", [])) + ".")
    return "\n\n".join(out)


def sharing_block(d: Data) -> str:
    if not d["rows"]:
        return f"{_run_line(d)}\n\nNot measured: {d.get('graph_missing')}."
    return _run_line(d) + "\n\n" + render(
        ["workspace", "mode", "binaries", "binaries × objects", "backend edges run", "compiler runs, sharing off",
         "compiler runs, sharing on", "off / (b × o)", "on / (b × o)", "clean wall s, off", "clean wall s, on",
         "wall on / off"],
        [[r["workspace"], r["mode"], r["binaries"], r["binaries_x_objects"], r["backend_edges_run"],
          r["compiler_runs_off"], r["compiler_runs"], ratio(r["compiler_runs_off"], r["binaries_x_objects"]),
          ratio(r["compiler_runs"], r["binaries_x_objects"]), r["wall_off_s"], r["wall_s"],
          ratio(r["wall_s"], r["wall_off_s"])] for r in d["rows"]], markdown=True)


def remote_block(d: Data) -> str:
    if not d["rows"]:
        return f"{_run_line(d)}\n\nNot measured: {d.get('missing')}."
    main = render(["subject / build", "wall s", "actions", "remote runs", "cache hits", "local fallbacks",
                   "bytes uploaded", "input bytes", "naive upload bytes", "mean backend ms"],
                  [[f"{r['subject']} {r['build']}", r["wall_s"], r["actions"], r["remote_executions"], r["cache_hits"],
                    r["local_fallbacks"], r["bytes_uploaded"], r["input_bytes"], r["naive_upload_bytes"],
                    r["mean_backend_ms"]] for r in d["rows"]], markdown=True)
    rat = render(["subject", "uploaded / naive", "inputs / naive", "hit rate, fresh dir", "overhead ms / action",
                  "remote / local per action", "clean d1 / c"],
                 [[r["subject"], r["uploaded_vs_naive"], r.get("inputs_vs_naive"), r["d2_cache_hit_rate"],
                   r["per_action_overhead_ms"], r["per_action_remote_vs_local"], r["clean_d1_vs_c_wall"]]
                  for r in d["ratios"]], markdown=True)
    return f"{_run_line(d)}\n\n{main}\n\n{rat}"


def index_block(d: Data) -> str:
    return f"{_run_line(d)}\n\n```\n{d['output'].strip()}\n```"


def _goal(rows: list[list[Any]], goal: str, where: str, value: float | None, target: float, at_most: bool) -> None:
    if value is None:
        rows.append([goal, where, None, f"{'≤' if at_most else '≥'} {target:g}", "not measured"])
        return
    met = value <= target if at_most else value >= target
    if met:
        verdict = "met"
    elif at_most and target == 0:
        verdict = f"missed by {value:g}"
    else:
        verdict = f"missed by {(value / target if at_most else target / value if value else float('inf')):.2f}×"
    rows.append([goal, where, value, f"{'≤' if at_most else '≥'} {target:g}", verdict])


def goals_block(data: dict[str, Data | None]) -> str:
    """Every goal of the issue against the latest numbers: met, or missed by how much."""
    rows: list[list[Any]] = []
    scale_rows = []
    for name in ("scale", "scale-large"):
        d = data.get(name)
        if d:
            scale_rows += d["ratios"]
    for r in scale_rows:
        chromium = r["workspace"].startswith("chromium")
        # The goals are about our graph's backend edges; null-index is in the tables, but for the Chromium-shaped
        # workspace, where it is the default mode ([hook-perf]: products thin-linked, tests null-index).
        if r["mode"] != "graph" and not chromium:
            continue
        where = f"{r['workspace']} {r['mode']}"
        if r["parse_per_backend_vs_naive"] is not None:
            _goal(rows, "ninja parse time per backend edge vs naive", where, r["parse_per_backend_vs_naive"], 0.5, True)
            _goal(rows, "ninja RSS per backend edge vs naive", where, r["rss_per_backend_vs_naive"], 0.5, True)
        _goal(rows, "hook time vs ninja's load (parse) time", where, r["hook_s_vs_ninja_parse_s"], 1.0, True)
        if r.get("hook_rss_vs_ninja_rss") is not None:
            _goal(rows, "hook peak RSS vs ninja's RSS (no-op)", where, r["hook_rss_vs_ninja_rss"], 1.0, True)
        if chromium and r["mode"] == "null_index":
            _goal(rows, "no-op build vs GN alone's no-op", where, r["noop_vs_gn_alone"], 2.0, True)
    regen = data.get("regen")
    for r in (regen or {}).get("ratios", []):
        if r["edit"] == "no change":  # the floor, in the regen table; the goal is about an edit
            continue
        _goal(rows, f"regeneration after {r['edit']}: hook, incremental / full", f"{r['workspace']} {r['mode']}",
              r["incremental_vs_full"], 0.2, True)
    build_ratios = [r for r in (data.get("builds") or {}).get("ratios", [])]
    build_ratios += [dict(r, subject=f"{r['subject']} (quiet re-run)") for r in (data.get("builds-quiet") or {}).get("ratios", [])]
    build_ratios += (data.get("builds-abseil") or {}).get("ratios", [])
    for r in build_ratios:
        if r["case"] == "clean":
            _goal(rows, "clean build wall (c) / (a)", r["subject"], r["c_vs_a_wall"], 1.05, True)
        elif r["case"] == "peak link-phase RSS":
            _goal(rows, "peak link-phase RSS (c) / (a)", r["subject"], r["c_vs_a_rss"], 0.5, True)
        else:
            _goal(rows, f"{r['case']} edit: wall (c) / (b)", r["subject"], r["c_vs_b_wall"], 1.0, True)
            _goal(rows, f"{r['case']} edit: speed-up (a) / (c)", r["subject"], r["a_vs_c_speedup"], 3.0, False)
    cache = data.get("cache")
    if cache:
        _goal(rows, "backend cache hit (the step ninja runs): verified / unverified", "example",
              _step_hit_ratio(cache["hits"]), 1.1, True)
        _goal(rows, "backend cache fetch alone: verified / unverified", "example",
              cache["hits"]["verified_vs_unverified"], 1.1, True)
        _goal(rows, "backend cache prune time, s", f"{cache['prune']['entries']} entries",
              cache["prune"]["trim_tenth_s"], 1.0, True)
        _goal(rows, "shared cache: compiler runs / distinct backends", "two example builds",
              cache["shared"]["runs_vs_distinct"], 1.0, True)
    dtlto = {r["variant"][:3]: r for r in (data.get("dtlto") or {}).get("rows", [])}
    if "(b)" in dtlto:
        _goal(rows, "DTLTO link wall: goma-ext local / lld in-process", "ninja_test", dtlto["(b)"]["wall_vs_a"], 1.1,
              True)
    if "(d)" in dtlto:
        _goal(rows, "DTLTO fresh-directory remote link: jobs executed", "ninja_test", dtlto["(d)"]["remote"], 0, True)
    proxy = (data.get("proxy") or {}).get("goals")
    if proxy:
        _goal(rows, "proxy: client CPU per action-cache hit / in-process client", "example actions",
              proxy["client_cpu_per_hit_proxy_vs_in_process"], 0.2, True)
        _goal(rows, "proxy: fresh-directory remote build (all hits) wall / local graph build", "example",
              proxy["fresh_dir_all_hits_wall_vs_local"], 1.0, True)
        _goal(rows, "proxy: remote per-action overhead / in-process client's", "example",
              proxy["remote_overhead_proxy_vs_in_process"], 0.5, True)
    for r in (data.get("isolation") or {}).get("rows", []):
        if r["action"].startswith("example backends"):
            _goal(rows, "sandbox set-up + tear-down per action, ms (median, bwrap − none)", r["action"], r["cost_ms"],
                  15, True)
    _lean_goals(rows, data)
    _scale_goals(rows, data)
    return render(["goal", "where", "measured", "target", "verdict"], rows, markdown=True)


def _lean_goals(rows: list[list[Any]], data: dict[str, Data | None]) -> None:
    """[lean]'s goals: the step per backend edge, clean builds, the proxy and client per action, scheduling."""
    for r in (data.get("step") or {}).get("rows", []):
        if r["variant"] == "server":
            _goal(rows, f"[lean] our backend step per edge, {r['case']}, ms (median own wall)",
                  f"example ({r['steps']} steps)", r["wall_ms"], 3, True)
            _goal(rows, f"[lean] our backend step per edge, {r['case']}, ms (mean CPU, server's share included)",
                  f"example ({r['steps']} steps)", r["cpu_ms"], 3, True)
    clean = {r["subject"]: r for r in (data.get("builds") or {}).get("ratios", []) if r["case"] == "clean"}
    for subject in ("example", "ninja"):
        _goal(rows, "[lean] clean build wall (c) / (a)", subject, (clean.get(subject) or {}).get("c_vs_a_wall"), 1.0,
              True)
    real = next((r for r in (data.get("builds-abseil") or {}).get("ratios", []) if r["case"] == "clean"), {})
    _goal(rows, "[lean] clean build wall (c) / (a)", "abseil with its tests (402 TUs, 53 test binaries)",
          real.get("c_vs_a_wall"), 0.9, True)
    proxy = data.get("proxy") or {}
    _goal(rows, "[lean] proxy CPU per remote action, ms", "proxy load test", proxy.get("proxy_cpu_ms_per_action"), 0.5,
          True)
    _goal(rows, "[lean] client CPU per remote action, ms", "proxy load test", proxy.get("client_cpu_ms_per_action"), 5,
          True)
    sched = {(r["subject"], r["variant"][:3], r["ninja"].split(".")[1] >= "12"): r
             for r in (data.get("scheduling") or {}).get("rows", [])}
    for (subject, variant, newer), r in sorted(sched.items()):
        old = sched.get((subject, variant, False))
        if newer and old:  # shorter only when every run of it beats every run of 1.11: the runs spread by ~10 %
            shorter = max(r["walls"]) < min(old["walls"])
            rows.append(["[lean] clean build wall, ninja with critical-path scheduling / 1.11", f"{subject} {variant}",
                         ratio(r["wall_s"], old["wall_s"]), "< 1 beyond the runs' spread",
                         "shorter" if shorter else "no difference beyond the spread"])


def _scale_goals(rows: list[list[Any]], data: dict[str, Data | None]) -> None:
    """[scale]'s goals: the busiest proxy shard and the client side per action, the scale model's bound at 1,000
    remote cores, the bytes down on the shaped link."""
    for name in ("proxy-shards", "proxy-shards-16"):
        shards = data.get(name) or {}
        if name != "proxy-shards" and not shards:
            continue
        goals = shards.get("goals") or {}
        where = f"load test, {shards.get('shards', '?')} shards"
        for mix in ("hits", "clean"):
            for net, how in (("", ""), ("net_", ", net of the idle background")):
                if f"{net}busiest_shard_ms_per_action_{mix}" not in goals and net:
                    continue  # a result from before the idle background was measured
                _goal(rows, f"[scale] proxy CPU per action, busiest shard, ms ({mix}{how})", where,
                      goals.get(f"{net}busiest_shard_ms_per_action_{mix}"), 0.5, True)
                _goal(rows, f"[scale] client-side CPU per action, ms ({mix}{how})", where,
                      goals.get(f"{net}client_cpu_ms_per_action_{mix}"), 5, True)
    for cores in (32, 64):
        for r in (data.get(f"scale-model-shards-{cores}") or {}).get("rows", []):
            if r["remote cores"] == 1000:
                remote = max(r["remote cores bound s"], r["longest backend bound s"])
                client = max(r["proxy bound s"], r["step server bound s"], r["client CPU bound s"])
                _goal(rows, f"[scale] backend phase at 1,000 remote cores, compile {r['compile ×']}: our client "
                      "side's bound / the remote side's",
                      f"scale model, {cores}-core build machine: ours {client:.1f} s; remote cores "
                      f"{r['remote cores bound s']:.1f} s, longest backend {r['longest backend bound s']:.1f} s",
                      ratio(client, remote), 1.0, True)
    for name, subject in (("shaped-compression", "example"), ("shaped-abseil-compression", "abseil")):
        for r in (data.get(name) or {}).get("rows", []):
            if r["link"] == "shaped" and r["download"] == "minimal":
                _goal(rows, "[scale] bytes down / linked binaries, `download: minimal`, shaped link",
                      f"{subject}, {r['build']}, compression {r['compression']}", r["down_vs_linked_binaries"], 1.05,
                      True)


def step_block(d: Data) -> str:
    if not d["rows"]:
        return f"{_run_line(d)}\n\nNot measured: {d.get('missing')}."
    main = render(["variant", "case", "steps", "own wall ms (median)", "own wall ms (mean)", "CPU ms per step",
                   "of which the server's"],
                  [[r["variant"], r["case"], r["steps"], r["wall_ms"], r["wall_mean_ms"], r["cpu_ms"],
                    r["server_cpu_ms"]] for r in d["rows"]], markdown=True)
    return f"{_run_line(d)} Source: {d.get('source', '?')}.\n\n{main}\n\nCheck: {d.get('check')}."


def scheduling_block(d: Data) -> str:
    main = render(["subject", "variant", "ninja", "clean wall s (median)", "walls s", "critical path s",
                   "of which waiting s"],
                  [[r["subject"], r["variant"], r["ninja"], r["wall_s"], ", ".join(f"{w:.1f}" for w in r["walls"]),
                    r["critical_path_s"], r["waited_s"]] for r in d["rows"]], markdown=True)
    checks = "".join(f"\n- {c}" for c in d.get("checks", []))
    return f"{_run_line(d)}\n\n{main}\n\nChecks:{checks}"


def _step_hit_ratio(h: dict[str, Any]) -> float | None:
    """A whole backend step's hit with verification over the same hit without it (the step minus what
    verification adds to the fetch)."""
    step_us = h["step_hit_ms"] * 1000
    return ratio(step_us, step_us - (h["verified_us"] - h["unverified_us"]))


def cache_block(d: Data) -> str:
    h, p, s = d["hits"], d["prune"], d["shared"]
    return "\n\n".join([
        _run_line(d),
        render(["entries", "mean object bytes", "verified fetch µs", "unverified fetch µs", "fetch verified / unverified",
                "whole step hit ms", "step hit verified / unverified"],
               [[h["entries"], h["mean_object_bytes"], h["verified_us"], h["unverified_us"],
                 h["verified_vs_unverified"], h["step_hit_ms"], _step_hit_ratio(h)]], markdown=True),
        render(["entries", "prune, nothing to remove, s", "prune, least recently used tenth, s", "removed"],
               [[p["entries"], p["scan_only_s"], p["trim_tenth_s"], p["entries_removed"]]], markdown=True),
        render(["compiler runs", "distinct backends", "runs / distinct", "backend steps", "wall s"],
               [[s["compiler_runs"], s["distinct_backends"], s["runs_vs_distinct"], s["backend_steps"], s["wall_s"]]],
               markdown=True),
        "Checks: " + "; ".join(s["checks"]) + ".",
    ])


def dtlto_block(d: Data) -> str:
    from bench.dtlto_bench import COLUMNS, table_rows

    missing = f"\n\nRemote rows not measured: {d['remote_missing']}." if d.get("remote_missing") else ""
    return _run_line(d) + "\n\n" + render(COLUMNS, table_rows(d["rows"]), markdown=True) + missing


def proxy_block(d: Data) -> str:
    if d.get("missing"):
        return f"{_run_line(d)}\n\nNot measured: {d['missing']}."
    h, load, g = d["hits"], d["load"], d["goals"]
    builds = render(["build", "wall s", "actions", "remote runs", "cache hits", "local fallbacks", "mean backend ms"],
                    [[r["build"], r["wall_s"], r["actions"], r["remote_executions"], r["cache_hits"],
                      r["local_fallbacks"], r["mean_backend_ms"]] for r in d["rows"]], markdown=True)
    hits = render(["client", "CPU ms per action-cache hit", "wall ms per hit (median)", "hits"],
                  [["in-process (`python -m goma_ext.remote.wrapper`, GOMA_EXT_PROXY=off)", h["in_process_cpu_ms"],
                    h["in_process_wall_ms"], h["hits"]],
                   ["thin client + proxy (`python -S …/thin_client.py`)", h["proxy_cpu_ms"], h["proxy_wall_ms"],
                    h["hits"]]], markdown=True)
    clients = {"thin": "thin client per action", "steps": "step launcher + step server"}

    def load_row(run: Data) -> list[Any]:
        per = {k: 1000 * v / run["actions"] for k, v in run["cpu_s"].items()}
        steps = run.get("client") == "steps"
        return [clients[run.get("client", "thin")], run["actions"], run["distinct"], run["clients"], run["lost"],
                run["wrong"], f"{run['modes'].get('remote', 0)} / {run['modes'].get('cache_hit', 0)}", run["wall_s"],
                run["actions"] / run["wall_s"], run["p50_ms"], run["p99_ms"], run["client_cpu_ms"],
                1000 * run["step_server_cpu_s"] / run["actions"] if steps else None,
                run.get("python_steps") if steps else None, per.get("proxy"), per.get("buildgrid"),
                per.get("postgres"), per.get("workers")]

    load_table = render(
        ["client", "actions", "distinct", "clients", "lost", "wrong", "remote / cache hit", "wall s", "actions / s",
         "p50 ms", "p99 ms", "client CPU ms / action", "of which step server", "Python steps", "proxy",
         "BuildGrid", "PostgreSQL", "workers"],
        [load_row(run) for run in (d.get("thin_load"), load) if run], markdown=True)
    goals = render(["ratio", "value"], [[k.replace("_", " "), v] for k, v in g.items()], markdown=True)
    return "\n\n".join([f"{_run_line(d)} {d.get('workers', '?')} workers on each cluster.",
                          builds, hits, load_table, goals])


def isolation_block(d: Data) -> str:
    if not d["rows"]:
        return f"{_run_line(d)}\n\nNot measured: {d.get('missing')}."
    main = render(["action", "runs", "none ms (median)", "bwrap ms (median)", "cost ms (median of pairs)",
                   "none ms (mean)", "bwrap ms (mean)"],
                  [[r["action"], r["runs"], r["none_ms"], r["bwrap_ms"], r["cost_ms"], r["none_mean_ms"],
                    r["bwrap_mean_ms"]] for r in d["rows"]], markdown=True)
    phases = d.get("phases") or []
    if not phases:
        return f"{_run_line(d)} Source: {d.get('source', '?')}.\n\n{main}"
    steps = render(["worker step (per backend lease, toolchain as inputs)", "leases", "ms (median)", "ms (mean)",
                    "share of the lease (means)"],
                   [[p["phase"], p["actions"], p["median_ms"], p["mean_ms"], p["share_of_lease"]] for p in phases],
                   markdown=True)
    return f"{_run_line(d)} Source: {d.get('source', '?')}.\n\n{main}\n\n{steps}"


def regen_block(d: Data) -> str:
    rows = [[f"{r['workspace']} {r['mode']}", r["edit"], f"{r['planned']:g} of {r['links']}", r["repeats"],
             r["gn_gen_s"], r["full_s"], r["incremental_s"], r["incremental_vs_full"]] for r in d["ratios"]]
    main = render(["workspace / mode", "edit", "links planned", "edits", "gn gen s", "hook full s",
                   "hook incremental s", "incremental / full"], rows, markdown=True)
    return f"{_run_line(d)} Source: {d.get('source', '?')}.\n\n{main}"


# a run's `renders_as` (bench/registry.py) -> the function that renders its block
RENDERERS: dict[str, Callable[[Data], str]] = {
    "scale": scale_block, "builds": builds_block, "sharing": sharing_block, "remote": remote_block,
    "index": index_block, "cache": cache_block, "dtlto": dtlto_block, "proxy": proxy_block, "regen": regen_block,
    "isolation": isolation_block, "step": step_block, "scheduling": scheduling_block,
}


def fill(doc: str, blocks: dict[str, str]) -> str:
    for name, text in blocks.items():
        name = re.escape(name)
        pattern = re.compile(rf"(<!-- bench:{name} -->\n).*?(<!-- /bench:{name} -->)", re.DOTALL)
        doc = pattern.sub(lambda m: m.group(1) + text + "\n" + m.group(2), doc)
    return doc


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench report", description=__doc__.splitlines()[0])
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--doc", type=Path, default=DOC)
    p.add_argument("--plots", type=Path, default=DOC.parent, help="directory for bench-*.png")
    args = p.parse_args(argv)
    data = {r.name: results.read(args.results, r.name) for r in registry.RUNS}
    blocks = {r.name: RENDERERS[r.renders_as](d) for r in registry.RUNS
              if r.renders_as and (d := data[r.name]) is not None}
    blocks["goals"] = goals_block(data)
    large = data.pop("scale-large")  # the plots draw the large graphs on the scale plot
    if large is not None and data["scale"] is not None:
        data["scale"] = dict(data["scale"], rows=data["scale"]["rows"] + large["rows"])
    write_if_changed(args.doc, fill(args.doc.read_text(), blocks))
    try:
        from bench import plots
    except ImportError as e:
        print(f"report: no plots ({e.name} not installed: pip install -e .[bench])")
    else:
        for path in plots.write_all(data, args.plots):
            print(f"report: {path}")
    print(f"report: {args.doc} ({', '.join(sorted(blocks)) or 'no results'})")
    return 0
