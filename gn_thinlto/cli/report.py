"""`gn-thinlto report OUT [--json] [--dtlto] [--build]`: goma-ext's remote stats, or with --build where the last
build's time went (critical path by phase, serial fraction, per binary, slowest backends: build_analysis)."""

from __future__ import annotations

import argparse
import json

from gn_thinlto.cli import build_analysis, trace
from gn_thinlto.errors import GnThinltoError
from goma_ext.remote import report_cli


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = report_cli.add_parser(commands)
    p.add_argument("--build", action="store_true",
                   help="the last build instead: critical path, serial fraction, per binary, slowest backends")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not args.build:
        return report_cli.run(args)
    log = args.out / ".ninja_log"
    if not log.is_file():
        raise GnThinltoError(f"{log}: no such file; build {args.out} with ninja first")
    edges = trace.last_build(log.read_text())
    if not edges:
        raise GnThinltoError(f"{log}: no build recorded")
    backend_log = args.out / trace.BACKEND_LOG
    cache = trace.cache_verdicts(backend_log.read_text()) if backend_log.is_file() else {}
    report = build_analysis.analyse(edges, trace.read_links(args.out), cache, build_analysis.read_graph(args.out))
    print(json.dumps(report, indent=2) if args.json else build_analysis.text(report))
    return 0
