"""What the gn-thinlto and goma-ext command lines share: --version, a subcommand per module, errors as one line."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from goma_ext import __version__
from goma_ext.errors import one_line

Register = Callable[[argparse._SubParsersAction], object]


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, as every other error (its subcommands' parsers are
    of this class too): `PROG: error: MESSAGE (see PROG --help)`."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)\n")


def build_parser(prog: str, description: str | None, commands: Sequence[Register]) -> argparse.ArgumentParser:
    """A parser whose subcommands are registered by each module's `add_parser` (each sets `run=`)."""
    parser = Parser(prog=prog, description=description)
    parser.add_argument("--version", action="version", version=f"{prog} {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add_parser in commands:
        add_parser(subparsers)
    return parser


def run_cli(parser: argparse.ArgumentParser, argv: Sequence[str] | None, errors: tuple[type[Exception], ...]) -> int:
    """Parse, run the chosen command; the project's own errors become `PROG: error: …` and exit 2."""
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args.run(args))
    except errors as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `… | head`: the reader left; say nothing more (stdout is gone)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
