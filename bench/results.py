"""Benchmark results as JSON under a results directory (one file per benchmark); docs are rendered from them."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import Any

from bench import cluster_tool
from bench.machine import busy_processes, describe, load_average

DEFAULT_RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _plain(value: Any) -> Any:
    if is_dataclass(value) and not isinstance(value, type):
        return _plain(asdict(value))
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        return round(value, 4)
    return value


def context() -> dict[str, Any]:
    """What to record before a benchmark: when, on what, how busy."""
    ctx = {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": describe(),
           "load_1min_at_start": load_average(), "busy_at_start": busy_processes()}
    shared = cluster_tool.existing()
    if shared:  # a smoke test's run on a cluster serving other work: not a measurement of a cluster of its own
        ctx["shared_cluster"] = shared
    return ctx


def write(results_dir: Path, name: str, data: dict[str, Any]) -> Path:
    """Atomically write RESULTS_DIR/NAME.json (sorted keys, stable across runs but for the numbers)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    data = dict(data, finished_utc=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                load_1min_at_end=load_average())
    path = results_dir / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(_plain(data), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def read(results_dir: Path, name: str) -> dict[str, Any] | None:
    path = results_dir / f"{name}.json"
    return json.loads(path.read_text()) if path.is_file() else None
