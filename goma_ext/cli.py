"""The `goma-ext` command line: argument parsing and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from goma_ext import __version__, cmd_index, cmd_inputs, run
from goma_ext.cluster import cli as cluster_cli
from goma_ext.errors import GomaExtError
from goma_ext.remote import report_cli
from goma_ext.worker import cli as worker_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="goma-ext", description=__doc__)
    parser.add_argument("--version", action="version", version=f"goma-ext {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    cmd_index.add_parser(commands)
    cmd_inputs.add_parser(commands)
    run.add_parser(commands)
    worker_cli.add_parser(commands)
    cluster_cli.add_parser(commands)
    report_cli.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except GomaExtError as e:
        print(f"goma-ext: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
