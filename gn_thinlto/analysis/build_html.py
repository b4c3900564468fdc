"""The build report (build_analysis) as one self-contained HTML page: tables, and two PNG plots drawn with
matplotlib (an optional extra: without it the page says so and keeps the tables) embedded as data URIs.

Plots: the timeline (one row per parallel slot, each edge a bar coloured by phase, the critical path outlined)
and the time spent per phase, summed over edges and along the critical path.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from typing import Any

from gn_thinlto.analysis.build_log import Link, LogEdge, PhaseIndex, slots

PHASE_COLOURS = {"compile": "#4e79a7", "thin link": "#e15759", "backend": "#59a14f", "final link": "#f28e2b",
                 "other": "#bab0ab"}


# After loading, the body records how many plots decoded (data-plots) and how many tables there are
# (data-tables): what a headless browser's DOM dump shows of a page that really rendered.
LOADED_SCRIPT = ("addEventListener('load',()=>{const b=document.body;"
                 "b.dataset.plots=[...document.images].filter(i=>i.naturalWidth>0).length;"
                 "b.dataset.tables=document.querySelectorAll('table').length;});")


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode()


def plots(edges: Sequence[LogEdge], links: Sequence[Link], report: Mapping[str, Any]) -> dict[str, str] | None:
    """{"timeline": base64 PNG, "phases": base64 PNG}, or None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    index = PhaseIndex(links)
    on_path = {s["output"] for s in report["critical_path"]}
    track = slots(edges)
    fig, ax = plt.subplots(figsize=(11, 0.35 * (max(track, default=0) + 1) + 1.2))
    for edge, slot in zip(edges, track):
        phase = index.phase_of(edge)[0]
        ax.broken_barh([(edge.start_ms / 1000, max(edge.end_ms - edge.start_ms, 1) / 1000)], (slot - 0.4, 0.8),
                       facecolors=PHASE_COLOURS[phase], edgecolors="black" if edge.outputs[0] in on_path else "none",
                       linewidth=1.2)
    ax.set_xlabel("seconds since the build started")
    ax.set_ylabel("slot")
    ax.set_title("timeline (critical path outlined)")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=c) for c in PHASE_COLOURS.values()],
              labels=list(PHASE_COLOURS),
              loc="upper left", bbox_to_anchor=(1, 1))
    timeline = _png(fig)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3))
    names = list(PHASE_COLOURS)
    total = [report["phase_ms"].get(p, 0) / 1000 for p in names]
    path = [report["critical_path_ms_by_phase"].get(p, 0) / 1000 for p in names]
    xs = range(len(names))
    ax.bar([x - 0.2 for x in xs], total, 0.4, label="all edges", color=[PHASE_COLOURS[p] for p in names])
    ax.bar([x + 0.2 for x in xs], path, 0.4, label="critical path", color="none", edgecolor="black", hatch="//")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("seconds")
    ax.set_title("time per phase")
    ax.legend()
    phases = _png(fig)
    plt.close(fig)
    return {"timeline": timeline, "phases": phases}


def _table(caption: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><caption>{html.escape(caption)}</caption><tr>{head}</tr>{body}</table>"


def page(out_dir: str, report: Mapping[str, Any], images: Mapping[str, str] | None) -> str:
    s = lambda ms: f"{ms / 1000:.2f}"  # noqa: E731 (a formatter used in every table)
    summary = (f"Last build of {out_dir}: {report['edges']} edges, {s(report['wall_ms'])} s wall; "
               f"{report['serial_fraction']:.0%} of the wall time with at most one edge running.")
    figures = ("".join(f'<figure><img alt="{name}" src="data:image/png;base64,{data}"><figcaption>{name}'
                       "</figcaption></figure>" for name, data in images.items()) if images
               else "<p>No plots: matplotlib is not installed (pip install 'gn-thinlto[report]').</p>")
    tables = [
        _table("critical path", ["start s", "end s", "waited s", "phase", "binary", "output"],
               [[s(x["start_ms"]), s(x["end_ms"]), s(x["waited_ms"]), x["phase"], x["binary"], x["output"]]
                for x in report["critical_path"]]),
        _table("time per phase (s)", ["phase", "all edges", "critical path"],
               [[p, s(ms), s(report["critical_path_ms_by_phase"].get(p, 0))] for p, ms in report["phase_ms"].items()]),
        _table("binaries", ["binary", "bitcode objects", "used", "backends run", "cache hits",
                            "shared with other binaries", "backend s", "thin link s", "final link s"],
               [[r["binary"], r["bitcode_objects"], r["used"], r["backends_run"], r["cache_hits"],
                 r["shared_with_other_binaries"], s(r["backend_ms"]), s(r["thin_link_ms"]), s(r["final_link_ms"])]
                for r in report["binaries"]]),
        _table("ten slowest backends", ["s", "binary", "output", "cache"],
               [[s(b["ms"]), b["binary"], b["output"], b["cache"]] for b in report["slowest_backends"]]),
    ]
    style = ("body{font-family:sans-serif;margin:1em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 6px;font-size:13px}caption{font-weight:bold;text-align:left}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>gn-thinlto build report</title>"
            f"<style>{style}</style></head><body><h1>gn-thinlto build report</h1><p>{html.escape(summary)}</p>"
            f"{figures}{''.join(tables)}<script>{LOADED_SCRIPT}</script></body></html>\n")
