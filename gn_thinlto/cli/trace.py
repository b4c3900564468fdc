"""`gn-thinlto trace OUT [-o FILE]`: the last build of OUT as a Chrome trace-event JSON file (Perfetto UI,
chrome://tracing); the tracks and slices are gn_thinlto.analysis.build_log's."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gn_thinlto.analysis.build_log import cache_verdicts, read_build, read_links, remote_runs, trace_events
from gn_thinlto.errors import write_text
from gn_thinlto.hook import STATE_DIR
from goma_ext.remote import stats
from goma_ext.remote.config import DEFAULT_STATS_LOG

BACKEND_LOG = f"{STATE_DIR}/backend.log"


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("trace", help="the last build as a Chrome/Perfetto trace (JSON)")
    p.add_argument("out", type=Path, help="build directory")
    p.add_argument("-o", "--output", type=Path, help="trace file (default: OUT/gn-thinlto/trace.json)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    edges, backend_text = read_build(args.out)
    remote_log = args.out / DEFAULT_STATS_LOG
    records = stats.read(remote_log) if remote_log.is_file() else []
    trace = trace_events(edges, read_links(args.out), cache_verdicts(backend_text), remote_runs(backend_text, records))
    output = args.output or args.out / STATE_DIR / "trace.json"
    write_text(output, json.dumps(trace) + "\n", "-o" if args.output else "")
    phases: dict[str, int] = {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            phases[e["cat"]] = phases.get(e["cat"], 0) + 1
    summary = ", ".join(f"{n} {p}" for p, n in sorted(phases.items()))
    print(f"trace of the last build ({len(edges)} edges: {summary}) written to {output}")
    return 0
