"""`gn-thinlto report OUT [--json] [--dtlto] [--build] [--html FILE]`: goma-ext's remote stats, or with --build
where the last build's time went (critical path by phase, serial fraction, per binary, slowest backends:
build_report), also as an HTML page with plots (build_html)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gn_thinlto.analysis import build_html, build_log, build_report
from gn_thinlto.errors import write_text
from goma_ext.remote import report_cli


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = report_cli.add_parser(commands)
    p.add_argument("--build", action="store_true",
                   help="the last build instead: critical path, serial fraction, per binary, slowest backends")
    p.add_argument("--html", type=Path, metavar="FILE",
                   help="also write the --build report (implied) as a self-contained HTML page with plots")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if not (args.build or args.html):
        return report_cli.run(args)
    edges, backend_text = build_log.read_build(args.out)
    links = build_log.read_links(args.out)
    report = build_report.analyse(edges, links, build_log.cache_verdicts(backend_text),
                                    build_report.read_graph(args.out), build_log.backend_keys(backend_text))
    print(json.dumps(report, indent=2) if args.json else build_report.text(report))
    if args.html:
        drawn: dict[str, dict[str, str] | None] = {}

        def page() -> str:  # drawn once the file is open: a path it cannot write fails first
            drawn["images"] = build_html.plots(edges, links, report)
            return build_html.page(str(args.out), report, drawn["images"])

        write_text(args.html, page, "--html")
        plain = "" if drawn["images"] else " (no plots: matplotlib missing)"
        print(f"HTML report{plain}: {args.html}", file=sys.stderr)
    return 0
