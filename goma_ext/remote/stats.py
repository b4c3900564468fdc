"""Per-run records of the wrapper (one JSON line each, in the build directory) and their sum for reports."""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goma_ext.errors import reason, shown
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote import records
from goma_ext.remote.config import DEFAULT_STATS_LOG


class Mode(enum.Enum):
    """How a wrapper run got its result."""

    REMOTE = "remote"          # executed by a worker
    CACHE_HIT = "cache_hit"    # served from the action cache
    LOCAL = "local"            # remote not configured
    FALLBACK = "fallback"      # remote failed, ran locally
    BACKEND_CACHE = "backend_cache"  # served by the local backend cache (the DTLTO distributor)


@dataclass(frozen=True)
class RunRecord:
    """One wrapper run."""

    output: str
    mode: Mode
    exit_code: int
    wall_s: float
    bytes_uploaded: int = 0
    input_bytes: int = 0
    naive_bytes: int | None = None
    phases: Mapping[str, float] = field(default_factory=dict)
    reason: str = ""
    bytes_downloaded: int = 0  # CAS bytes the run fetched, where it counts them (remote links)

    def to_json(self) -> str:
        return records.line(self.output, self.mode.value, self.exit_code, self.wall_s, self.bytes_uploaded,
                            self.input_bytes, self.naive_bytes, self.phases, self.reason, self.bytes_downloaded)


def append(log: Path, record: RunRecord) -> None:
    """Append one line with a single O_APPEND write, so concurrent wrappers never interleave."""
    records.append(log, record.to_json())


def read(log: Path) -> list[RunRecord]:
    """Parse a stats log; a torn or foreign line is an error naming its line number."""
    found = []
    try:
        lines = log.read_bytes().decode().splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise RemoteError(f"{shown(log)}: cannot read the stats log: {reason(e)}", temporary=False) from e
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            found.append(
                RunRecord(
                    output=str(d["output"]), mode=Mode(d["mode"]), exit_code=int(d["exit_code"]),
                    wall_s=float(d["wall_s"]), bytes_uploaded=int(d.get("bytes_uploaded", 0)),
                    input_bytes=int(d.get("input_bytes", 0)),
                    naive_bytes=None if d.get("naive_bytes") is None else int(d["naive_bytes"]),
                    phases={str(k): float(v) for k, v in dict(d.get("phases", {})).items()},
                    reason=str(d.get("reason", "")),
                    bytes_downloaded=int(d.get("bytes_downloaded", 0)),
                )
            )
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as e:
            raise RemoteError(f"{shown(log)}:{n}: not a stats record: {reason(e)}", temporary=False) from e
    return found


def summarize(records: Iterable[RunRecord]) -> dict[str, Any]:
    """Totals for `gn-thinlto report --json`: counts per mode, bytes, naive bytes, seconds per phase."""
    rs = list(records)
    counts = {m.value: sum(1 for r in rs if r.mode is m) for m in Mode}
    phases: dict[str, float] = {}
    for r in rs:
        for k, v in r.phases.items():
            phases[k] = phases.get(k, 0.0) + v
    naive_known = [r.naive_bytes for r in rs if r.naive_bytes is not None]
    return {
        "runs": len(rs),
        "modes": counts,
        "remote_executions": counts[Mode.REMOTE.value],
        "cache_hits": counts[Mode.CACHE_HIT.value],
        "local_fallbacks": counts[Mode.FALLBACK.value],
        "failed": sum(1 for r in rs if r.exit_code != 0),
        "bytes_uploaded": sum(r.bytes_uploaded for r in rs),
        "bytes_downloaded": sum(r.bytes_downloaded for r in rs),
        "input_bytes": sum(r.input_bytes for r in rs),
        "naive_upload_bytes": sum(naive_known) if naive_known else None,
        "naive_known_runs": len(naive_known),
        "wall_s": round(sum(r.wall_s for r in rs), 3),
        "phase_s": {k: round(v, 3) for k, v in sorted(phases.items())},
    }


def report(build_dir: Path, log_name: str = DEFAULT_STATS_LOG) -> dict[str, Any]:
    """Summary of BUILD_DIR's stats log."""
    return summarize(read(build_dir / log_name))
