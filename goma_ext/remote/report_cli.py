"""`report OUT [--json]`: sum the wrapper's stats log of a build directory (usable from goma-ext and gn-thinlto)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goma_ext.remote import stats
from goma_ext.remote.config import DEFAULT_STATS_LOG, DTLTO_STATS_LOG
from goma_ext.remote.names import LINK_STATS_LOG

MIB = 1024 * 1024


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """The `report` command; returns its parser so that gn-thinlto can add options of its own."""
    p = commands.add_parser("report", help="sum the remote/cache/fallback stats of a build directory")
    p.add_argument("out", type=Path, metavar="OUT", help="build directory")
    p.add_argument("--json", action="store_true", help="print the totals as JSON")
    p.add_argument("--dtlto", action="store_true",
                   help=f"sum the DTLTO distributor's log ({DTLTO_STATS_LOG}, in the link's directory) instead")
    p.add_argument("--links", action="store_true",
                   help=f"sum the remote final links' log ({LINK_STATS_LOG}: remote.download: minimal) instead")
    p.set_defaults(run=run)
    return p


def _mib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / MIB:.1f} MiB"


def run(args: argparse.Namespace) -> int:
    """An unreadable log is a RemoteError (a GomaExtError): both CLIs that register this command show it."""
    log = DTLTO_STATS_LOG if args.dtlto else LINK_STATS_LOG if args.links else DEFAULT_STATS_LOG
    summary = stats.report(args.out, log)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True))
        return 0
    m = summary["modes"]
    what = "final links" if args.links else "backend runs"
    print(
        f"{summary['runs']} {what}: {m['remote']} remote, {m['cache_hit']} cache hits, "
        f"{m['fallback']} local fallbacks, {m['local']} local, {m['backend_cache']} from the backend cache; "
        f"{summary['failed']} failed\n"
        f"uploaded {_mib(summary['bytes_uploaded'])} (exact input sets {_mib(summary['input_bytes'])}, "
        f"naive upload of every link object per backend {_mib(summary['naive_upload_bytes'])})"
        + (f"; downloaded {_mib(summary['bytes_downloaded'])}" if summary["bytes_downloaded"] else "")
    )
    return 0
