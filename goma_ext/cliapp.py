"""What the gn-thinlto and goma-ext command lines share: --version, a subcommand per module, errors as one line."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
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


def build_lazy_parser(prog: str, description: str | None, commands: Mapping[str, str],
                      argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """build_parser from COMMANDS, subcommand name -> the module whose `add_parser` registers it; when ARGV
    starts with one of the names, that module alone is imported: a command's start-up does not pay for every
    other command's imports (gRPC, the planner, Jinja). Anything else (--help, --version, a typo) gets them all.
    (pip finds its commands the same way.) Only the top of each program does this: a table of its own
    subcommands, checked by tests/unit/test_cli_registry.py; what the commands import stays in plain imports."""
    chosen = [argv[0]] if argv and argv[0] in commands else list(commands)
    return build_parser(prog, description, [importlib.import_module(commands[name]).add_parser for name in chosen])


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
