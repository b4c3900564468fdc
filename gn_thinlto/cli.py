"""The `gn-thinlto` command line: argument parsing and the one place errors become exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gn_thinlto import __version__, example, explain, gen
from gn_thinlto.errors import GnThinltoError
from goma_ext.remote import report_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gn-thinlto", description=__doc__)
    parser.add_argument("--version", action="version", version=f"gn-thinlto {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    example.add_parser(commands)
    gen.add_parser(commands)
    explain.add_parser(commands)
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
    except GnThinltoError as e:
        print(f"gn-thinlto: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
