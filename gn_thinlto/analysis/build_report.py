"""Where the last build's time went: its critical path by phase, its serial fraction, per-binary figures and
the slowest backends, from .ninja_log, the backend log and ninja's own graph (`ninja -t graph`).

The critical path is walked backwards from the edge that finished last: each step goes to the input's
producing edge (among those that ran in this build) that finished last, which is what held the edge back.
Each step also says how long it waited after its input was ready (ninja had no free slot, or other inputs
without timing were still being made). The serial fraction is the share of the build's wall time during
which at most one edge ran.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gn_thinlto.analysis.build_log import Link, LogEdge, PhaseIndex

_NODE = re.compile(r'^"(0x[0-9a-f]+)" \[label="(.*?)"(, shape=ellipse)?\]$')
_ARROW = re.compile(r'^"(0x[0-9a-f]+)" -> "(0x[0-9a-f]+)"( \[label=" .*"\])?( \[arrowhead=none\])?$')


def parse_graph(dot: str) -> dict[str, set[str]]:
    """Output file -> the files its edge reads, from `ninja -t graph`'s dot text. An edge with one input and
    one output is a labelled arrow between two files; any other goes through an ellipse node."""
    files: dict[str, str] = {}
    edge_nodes: set[str] = set()
    arrows: list[tuple[str, str]] = []
    for line in dot.splitlines():
        if m := _NODE.match(line):
            if m.group(3):
                edge_nodes.add(m.group(1))
            else:
                files[m.group(1)] = m.group(2).replace('\\"', '"')
        elif m := _ARROW.match(line):
            arrows.append((m.group(1), m.group(2)))
    edge_inputs: dict[str, set[str]] = {}
    inputs: dict[str, set[str]] = {}
    for src, dst in arrows:
        if dst in edge_nodes:
            edge_inputs.setdefault(dst, set()).add(src)
    for src, dst in arrows:
        if src in edge_nodes and dst in files:
            inputs.setdefault(files[dst], set()).update(files[i] for i in edge_inputs.get(src, ()) if i in files)
        elif src in files and dst in files:
            inputs.setdefault(files[dst], set()).add(files[src])
    return inputs


def read_graph(out_dir: Path) -> dict[str, set[str]]:
    """OUT's graph as parse_graph gives it; empty without it (no ninja, or a build.ninja ninja refuses)."""
    try:
        proc = subprocess.run(["ninja", "-C", str(out_dir), "-t", "graph"], capture_output=True, check=False)
    except OSError:
        return {}
    return parse_graph(proc.stdout.decode(errors="replace")) if proc.returncode == 0 else {}


@dataclass(frozen=True)
class Step:
    edge: LogEdge
    phase: str
    binary: str


def critical_path(edges: Sequence[LogEdge], inputs: Mapping[str, set[str]], index: PhaseIndex) -> list[Step]:
    """The chain of edges, first to last, that ended the build (see the module docstring)."""
    if not edges:
        return []
    producer = {out: e for e in edges for out in e.outputs}
    chain = [max(edges, key=lambda e: (e.end_ms, e.end_ms - e.start_ms))]
    seen = {chain[0]}
    while True:
        before = [producer[i] for out in chain[-1].outputs for i in inputs.get(out, ()) if i in producer]
        before = [e for e in before if e not in seen and e.end_ms <= chain[-1].start_ms + 1]
        if not before:
            break
        chain.append(max(before, key=lambda e: e.end_ms))
        seen.add(chain[-1])
    return [Step(e, *index.phase_of(e)) for e in reversed(chain)]


def serial_fraction(edges: Sequence[LogEdge]) -> float:
    """Share of the wall time (first start to last end) when at most one edge was running."""
    if not edges:
        return 0.0
    points = sorted([(e.start_ms, 1) for e in edges] + [(e.end_ms, -1) for e in edges], key=lambda p: (p[0], p[1]))
    wall = max(e.end_ms for e in edges) - min(e.start_ms for e in edges)
    serial, running, last = 0, 0, points[0][0]
    for t, delta in points:
        if running <= 1:
            serial += t - last
        running += delta
        last = t
    return serial / wall if wall else 0.0


def _shared(keys: Mapping[str, str], index: PhaseIndex) -> dict[str, int]:
    """Per binary: how many of its backends have the key of a backend of another binary (the same job)."""
    binaries_of: dict[str, set[str]] = {}
    for output, key in keys.items():
        binaries_of.setdefault(key, set()).add(index.phase_of(LogEdge(0, 0, (output,)))[1])
    shared: dict[str, int] = {}
    for output, key in keys.items():
        if len(binaries_of[key]) > 1:
            binary = index.phase_of(LogEdge(0, 0, (output,)))[1]
            shared[binary] = shared.get(binary, 0) + 1
    return shared


def analyse(edges: Sequence[LogEdge], links: Sequence[Link], cache: Mapping[str, str],
            inputs: Mapping[str, set[str]], keys: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The whole report as plain data (for text, JSON or HTML). KEYS: each native object's backend cache key
    (backend_keys), for the jobs shared between binaries."""
    index = PhaseIndex(links)
    shared = _shared(keys or {}, index)
    planned = {link.binary: link for link in links}
    path = critical_path(edges, inputs, index)
    start = min((e.start_ms for e in edges), default=0)
    wall = max(e.end_ms for e in edges) - start if edges else 0
    phase_ms: dict[str, int] = {}
    binaries: dict[str, dict[str, Any]] = {}
    backends: list[dict[str, Any]] = []
    for e in edges:
        phase, binary = index.phase_of(e)
        phase_ms[phase] = phase_ms.get(phase, 0) + e.end_ms - e.start_ms
        if not binary:
            continue
        link = planned.get(binary)
        row = binaries.setdefault(binary, {
            "binary": binary, "bitcode_objects": link.bitcode_objects if link else 0,
            "used": link.used if link else 0, "backends_run": 0, "cache_hits": 0,
            "shared_with_other_binaries": shared.get(binary, 0), "backend_ms": 0, "thin_link_ms": 0,
            "final_link_ms": 0})
        if phase == "backend":
            row["backends_run"] += 1
            row["cache_hits"] += cache.get(e.outputs[0]) == "hit"
            row["backend_ms"] += e.end_ms - e.start_ms
            backends.append({"output": e.outputs[0], "binary": binary, "ms": e.end_ms - e.start_ms,
                             "cache": cache.get(e.outputs[0], "unknown")})
        elif phase == "thin link":
            row["thin_link_ms"] += e.end_ms - e.start_ms
        elif phase == "final link":
            row["final_link_ms"] += e.end_ms - e.start_ms
    path_ms: dict[str, int] = {}
    for s in path:
        path_ms[s.phase] = path_ms.get(s.phase, 0) + s.edge.end_ms - s.edge.start_ms
    return {
        "edges": len(edges), "wall_ms": wall, "serial_fraction": round(serial_fraction(edges), 4),
        "phase_ms": dict(sorted(phase_ms.items())),
        "critical_path": [{"phase": s.phase, "binary": s.binary, "output": s.edge.outputs[0],
                           "start_ms": s.edge.start_ms, "end_ms": s.edge.end_ms,
                           "waited_ms": s.edge.start_ms - (path[i - 1].edge.end_ms if i else start)}
                          for i, s in enumerate(path)],
        "critical_path_ms_by_phase": dict(sorted(path_ms.items())),
        "binaries": sorted(binaries.values(), key=lambda r: r["binary"]),
        "slowest_backends": sorted(backends, key=lambda b: -b["ms"])[:10],
    }


def text(report: Mapping[str, Any]) -> str:
    """A short text rendering of analyse()'s report."""
    lines = [f"last build: {report['edges']} edges, {report['wall_ms'] / 1000:.1f} s wall, "
             f"{report['serial_fraction']:.0%} of it with at most one edge running"]
    by_phase = ", ".join(f"{p} {ms / 1000:.1f} s" for p, ms in report["critical_path_ms_by_phase"].items())
    lines.append(f"critical path: {len(report['critical_path'])} edges ({by_phase})")
    for step in report["critical_path"]:
        who = f" [{step['binary']}]" if step["binary"] else ""
        lines.append(f"  {step['start_ms'] / 1000:7.2f}–{step['end_ms'] / 1000:7.2f} s (waited "
                     f"{step['waited_ms'] / 1000:.2f} s)  {step['phase']}{who}  {step['output']}")
    lines.append("binary: bitcode objects, used by the thin link, backends run (cache hits, shared with other "
                 "binaries), backend s, thin link s, final link s")
    for row in report["binaries"]:
        lines.append(f"  {row['binary']}: {row['bitcode_objects']}, {row['used']}, {row['backends_run']} "
                     f"({row['cache_hits']}, {row['shared_with_other_binaries']}), {row['backend_ms'] / 1000:.1f}, "
                     f"{row['thin_link_ms'] / 1000:.2f}, {row['final_link_ms'] / 1000:.2f}")
    lines.append("slowest backends:")
    for b in report["slowest_backends"]:
        lines.append(f"  {b['ms'] / 1000:6.2f} s  {b['binary']}  {b['output']} ({b['cache']})")
    return "\n".join(lines)
