"""PNG plots of the latest results (matplotlib, Agg): where a picture reads better than a table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

Data = dict[str, Any]
VARIANT_NAMES = {"a": "(a) in-process", "b": "(b) + lld cache", "c": "(c) graph", "d": "(d) graph + remote",
                 "e": "(e) graph, no dyndep"}


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def _grouped(ax: Any, groups: list[str], series: dict[str, list[float]], ylabel: str, log: bool = False) -> None:
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, values, width, label=name)
    ax.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))], groups)
    ax.set_ylabel(ylabel)
    if log:
        ax.set_yscale("log")
    ax.legend(fontsize=8)


def scale(d: Data, path: Path) -> Path:
    workspaces = list(dict.fromkeys(r["workspace"] for r in d["rows"]))
    modes = [m for m in ("graph", "null_index", "naive") if any(r["mode"] == m for r in d["rows"])]
    by = {(r["workspace"], r["mode"]): r for r in d["rows"]}

    def per_edge(key: str, scale_: float) -> dict[str, list[float]]:
        out = {}
        for m in modes:
            vals = []
            for w in workspaces:
                r = by.get((w, m))
                vals.append(r[key] * scale_ / r["backend_edges"] if r and r["backend_edges"] else 0.0)
            out[m] = vals
        return out

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4))
    _grouped(a1, workspaces, per_edge("parse_ms", 1000), "ninja parse µs per backend edge", log=True)
    _grouped(a2, workspaces, per_edge("noop_rss_mib", 1024), "ninja no-op RSS KiB per backend edge", log=True)
    fig.suptitle("Graph scale: our graph vs the naive baseline (lower is better)")
    return _save(fig, path)


def builds(d: Data, path: Path) -> Path:
    subjects = list(dict.fromkeys(b["subject"] for b in d["builds"]))
    variants = sorted({b["variant"] for b in d["builds"]})
    cases = ["clean", "comment", "body", "leaf"]
    fig, axes = plt.subplots(1, len(subjects), figsize=(6 * len(subjects), 4), squeeze=False)
    for ax, subject in zip(axes[0], subjects):
        by = {(b["case"], b["variant"]): b["wall_s"] for b in d["builds"] if b["subject"] == subject}
        _grouped(ax, cases, {VARIANT_NAMES[v]: [by.get((c, v), 0.0) for c in cases] for v in variants},
                 "wall time, s (log)", log=True)
        ax.set_title(subject)
    fig.suptitle("Clean and incremental builds, side by side (lower is better)")
    return _save(fig, path)


def sharing(d: Data, path: Path) -> Path:
    rows = d["rows"]
    labels = [f"{r['workspace']}\n{r['mode']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(rows)), 4))
    _grouped(ax, labels, {
        "binaries × objects": [r["binaries_x_objects"] for r in rows],
        "compiler runs, sharing off": [r["compiler_runs_off"] for r in rows],
        "compiler runs, sharing on": [r["compiler_runs"] for r in rows],
    }, "backend jobs")
    ax.set_title("Duplicate codegen across binaries")
    return _save(fig, path)


def write_all(data: dict[str, Data | None], out_dir: Path) -> list[Path]:
    written = []
    for name, fn in (("scale", scale), ("builds", builds), ("sharing", sharing)):
        d = data.get(name)
        if d and (d.get("rows") or d.get("builds")):
            written.append(fn(d, out_dir / f"bench-{name}.png"))
    return written
