"""The `gn-thinlto` command line: generate, build the example, explain and report ThinLTO graphs, compare builds."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gn_thinlto.errors import GnThinltoError
from goma_ext.cliapp import build_lazy_parser, run_cli
from goma_ext.errors import GomaExtError

# subcommand -> its module (tests/unit/test_cli_registry.py checks each registers its name); in `--help` order
COMMANDS = {name: f"gn_thinlto.cli.{name}" for name in ("example", "gen", "explain", "cache", "trace", "report",
                                                         "parity")}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Every command's parser; with ARGV naming a command, only that command's (and only its module imported)."""
    return build_lazy_parser("gn-thinlto", __doc__, COMMANDS, argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    # gn-thinlto commands call into goma_ext (index decoding, remote settings): its errors are ours to show too.
    return run_cli(build_parser(args), args, (GnThinltoError, GomaExtError))


if __name__ == "__main__":
    sys.exit(main())
