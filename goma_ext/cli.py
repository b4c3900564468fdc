"""The `goma-ext` command line: decode ThinLTO indexes, list backend inputs, run backends remotely, serve them."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from goma_ext.cliapp import build_lazy_parser, run_cli
from goma_ext.errors import GomaExtError

# subcommand -> its module (tests/unit/test_cli_registry.py checks each registers its name); in `--help` order
COMMANDS = {
    "index": "goma_ext.bitcode.cli",
    "inputs": "goma_ext.inputs.cli",
    "run": "goma_ext.remote.wrapper",
    "worker": "goma_ext.worker.cli",
    "cluster": "goma_ext.cluster.cli",
    "report": "goma_ext.remote.report_cli",
    "fetch": "goma_ext.remote.fetch",
    "dtlto": "goma_ext.dtlto.cli",
    "proxy": "goma_ext.proxy.cli",
}


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """Every command's parser; with ARGV naming a command, only that command's (and only its module imported:
    lld starts the distributor once per link, and gRPC and the cluster manager would double its start-up)."""
    return build_lazy_parser("goma-ext", __doc__, COMMANDS, argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["dtlto"]:
        from goma_ext.dtlto import cli as dtlto_cli

        try:
            args = dtlto_cli.with_env_options(args, os.environ)
        except GomaExtError as e:
            print(f"goma-ext: error: {e}", file=sys.stderr)
            return 2
    return run_cli(build_parser(args), args, (GomaExtError,))


if __name__ == "__main__":
    sys.exit(main())
