"""The last build of a build directory, read back: ninja's .ninja_log (the last build's edges), the links'
manifests, the backend step's log (cache verdicts and keys) and goma-ext's run records, as edges with phases and
binaries; and those as Chrome trace events (`gn-thinlto trace`, `gn-thinlto report --build`).

One track per parallel slot (the lowest free one, as ninja's own slots would be); every edge is a slice
named by its phase — compile, thin link, backend, final link, other — and, for ThinLTO phases, its binary;
backend slices carry the backend cache's verdict (hit or miss) for that object and, for a miss, how it ran:
locally, or through goma-ext run (remote, action-cache hit or local fallback, with the bytes uploaded).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gn_thinlto.errors import GnThinltoError, is_file, read_text, shown
from gn_thinlto.hook import STATE_DIR
from gn_thinlto.steps.backend import REMOTE_STAGE
from gn_thinlto.steps.backend_log import CacheEvent
from gn_thinlto.steps.manifest import read_manifest
from gn_thinlto.steps.thinlink_paths import PARTITION_DIR
from goma_ext.remote.stats import RunRecord

BACKEND_LOG = f"{STATE_DIR}/backend.log"


@dataclass(frozen=True)
class LogEdge:
    """One edge of a build as .ninja_log records it: start and end in ms since the build began."""

    start_ms: int
    end_ms: int
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class Link:
    """What the trace needs of one planned link: its binary, its directory and its final outputs (and, for
    the report, how many bitcode objects it has and how many its thin link used)."""

    binary: str
    directory: str
    outputs: tuple[str, ...]
    bitcode_objects: int = 0
    used: int = 0


def last_build(ninja_log: str) -> list[LogEdge]:
    """The edges of the last build in a .ninja_log (v5+: start, end, mtime, output, hash per output). ninja
    appends an entry when its edge finishes, with times since its own start, so a new build begins where an
    entry ends before the previous one did; outputs of one edge share start, end and command hash. A line
    that is not an entry (a torn last line) is skipped, as ninja skips it."""
    rows: list[tuple[int, int, str, str]] = []
    for line in ninja_log.splitlines():
        if line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) < 5 or not (parts[0].isdigit() and parts[1].isdigit()):
            continue
        start, end = int(parts[0]), int(parts[1])
        if rows and end < rows[-1][1]:
            rows = []
        rows.append((start, end, parts[3], parts[4]))
    edges: dict[tuple[int, int, str], list[str]] = {}
    for start, end, output, command_hash in rows:
        edges.setdefault((start, end, command_hash), []).append(output)
    return sorted((LogEdge(s, e, tuple(o)) for (s, e, _), o in edges.items()), key=lambda x: (x.start_ms, x.outputs))


class PhaseIndex:
    """(phase, binary) of an edge — compile, thin link, backend, final link or other — by its first output's
    directory, a lookup per path prefix (not a scan of every link: Chromium has hundreds)."""

    def __init__(self, links: Sequence[Link]) -> None:
        self._dirs = {link.directory: link.binary for link in links}
        self._finals = {out: link.binary for link in links for out in link.outputs}

    def _link_dir(self, path: str) -> str | None:
        parts = path.split("/")
        for i in range(1, len(parts)):
            prefix = "/".join(parts[:i])
            if prefix in self._dirs:
                return prefix
        return None

    def phase_of(self, edge: LogEdge) -> tuple[str, str]:
        first = edge.outputs[0]
        directory = self._link_dir(first)
        if directory is not None:
            # partition edges (DIR/lto/partK.o) compile like backends and count with them
            partitions = f"{directory}/{PARTITION_DIR}/"
            phase = "backend" if first.startswith((f"{directory}/native/", partitions)) else "thin link"
            return phase, self._dirs[directory]
        final = next((self._finals[o] for o in edge.outputs if o in self._finals), None)
        if final is not None:
            return "final link", final
        if first.startswith(f"{STATE_DIR}/shared/"):
            return "backend", "shared"
        if first.endswith(".o") and first.startswith("obj/"):
            return "compile", ""
        return "other", ""


def slots(edges: Sequence[LogEdge]) -> list[int]:
    """The track of each edge (in order): the lowest slot free at its start."""
    free: list[int] = []
    busy: list[tuple[int, int]] = []  # (end, slot)
    count = 0
    out = []
    for e in edges:
        while busy and busy[0][0] <= e.start_ms:
            heapq.heappush(free, heapq.heappop(busy)[1])
        slot = heapq.heappop(free) if free else count
        count = max(count, slot + 1)
        heapq.heappush(busy, (e.end_ms, slot))
        out.append(slot)
    return out


def trace_events(edges: Sequence[LogEdge], links: Sequence[Link], cache: Mapping[str, str],
                 remote: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The trace: one complete ("X") event per edge on its slot's track, and track names."""
    events: list[dict[str, Any]] = []
    track = slots(edges)
    index = PhaseIndex(links)
    for edge, slot in zip(edges, track):
        phase, binary = index.phase_of(edge)
        args: dict[str, Any] = {"outputs": list(edge.outputs)}
        if binary:
            args["binary"] = binary
        if phase == "backend":
            args["cache"] = cache.get(edge.outputs[0], "unknown")
            if args["cache"] == CacheEvent.MISS:
                args.update((remote or {}).get(edge.outputs[0], {"execution": "local"}))
        name = f"{phase} {binary}: {edge.outputs[0]}" if binary else f"{phase}: {edge.outputs[0]}"
        events.append({"name": name, "cat": phase, "ph": "X", "ts": edge.start_ms * 1000,
                       "dur": max(edge.end_ms - edge.start_ms, 0) * 1000, "pid": 1, "tid": slot, "args": args})
    for slot in sorted(set(track)):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": slot, "args": {"name": f"slot {slot}"}})
    events.append({"name": "process_name", "ph": "M", "pid": 1, "tid": 0, "args": {"name": "ninja"}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def _backend_events(backend_log: str, events: tuple[str, ...]) -> Iterator[tuple[str, str, str]]:
    """(event, key, output) of each backend log line whose event is one of EVENTS, in order."""
    for line in backend_log.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] in events:
            yield parts[0], parts[1], parts[2]


def cache_verdicts(backend_log: str) -> dict[str, str]:
    """The backend cache's last verdict (hit, miss) for each native object."""
    return {output: event for event, _, output in _backend_events(backend_log, (CacheEvent.HIT, CacheEvent.MISS))}


def backend_keys(backend_log: str) -> dict[str, str]:
    """The cache key of each native object's last backend run: equal keys are the same job in two binaries."""
    return {output: key for _, key, output in _backend_events(backend_log, (CacheEvent.HIT, CacheEvent.MISS))}


def remote_runs(backend_log: str, records: Sequence[RunRecord]) -> dict[str, dict[str, Any]]:
    """For each native object the launcher (goma-ext run) made: how (remote, cache_hit = action cache,
    fallback) and the bytes it uploaded. The backend log names the staging directory (the content key) of
    each such object; the wrapper's records name the staged files inside it: the object, and for a two-step
    backend also the optimized module it was generated from (their bytes add up; differing modes are joined,
    e.g. `cache_hit+remote`)."""
    staged: dict[str, list[RunRecord]] = {}
    for r in records:
        if r.output.startswith(f"{REMOTE_STAGE}/"):
            staged.setdefault(r.output.split("/")[-2], []).append(r)

    def summary(runs: list[RunRecord]) -> dict[str, Any]:
        modes = list(dict.fromkeys(r.mode.value for r in runs))
        return {"execution": "+".join(modes), "bytes_uploaded": sum(r.bytes_uploaded for r in runs)}

    return {output: summary(staged[key])
            for _, key, output in _backend_events(backend_log, (CacheEvent.REMOTE,)) if key in staged}


def read_build(out_dir: Path) -> tuple[list[LogEdge], str]:
    """The last build's edges (.ninja_log) and the backend log's text; one clear error without a build."""
    log = out_dir / ".ninja_log"
    if not is_file(log):
        raise GnThinltoError(f"{shown(log)}: no such file; build {shown(out_dir)} with ninja first")
    edges = last_build(read_text(log))
    if not edges:
        raise GnThinltoError(f"{shown(log)}: no build recorded")
    backend_log = out_dir / BACKEND_LOG
    return edges, read_text(backend_log) if is_file(backend_log) else ""


def read_links(out_dir: Path) -> list[Link]:
    links = []
    for manifest in sorted((out_dir / STATE_DIR).glob("**/thinlink.json")):
        m = read_manifest(manifest, ("final_output",))
        directory = str(manifest.parent.relative_to(out_dir))
        final = m["final_output"].removeprefix("./")
        used_list = out_dir / m.get("used_list", "")
        used = len(read_text(used_list).split()) if m.get("used_list") and is_file(used_list) else 0
        links.append(Link(final, directory, (m["final_output"], final), len(m.get("bitcode", ())), used))
    return links
