"""The `goma-ext` command line: decode ThinLTO indexes, list backend inputs, run backends remotely, serve them."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from goma_ext.cliapp import build_parser as _build_parser
from goma_ext.cliapp import run_cli
from goma_ext.errors import GomaExtError


def build_parser() -> argparse.ArgumentParser:
    from goma_ext.bitcode import cli as cmd_index
    from goma_ext.cluster import cli as cluster_cli
    from goma_ext.dtlto import cli as dtlto_cli
    from goma_ext.inputs import cli as cmd_inputs
    from goma_ext.proxy import cli as proxy_cli
    from goma_ext.remote import report_cli
    from goma_ext.remote import wrapper as run
    from goma_ext.worker import cli as worker_cli

    return _build_parser(
        "goma-ext",
        __doc__,
        [cmd_index.add_parser, cmd_inputs.add_parser, run.add_parser, worker_cli.add_parser,
         cluster_cli.add_parser, report_cli.add_parser, dtlto_cli.add_parser, proxy_cli.add_parser],
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["dtlto"]:
        # lld starts the distributor once per link: its own parser only, without the other commands' imports
        # (gRPC, the cluster manager), which would double its start-up.
        from goma_ext.dtlto import cli as dtlto_cli

        parser = _build_parser("goma-ext", __doc__, [dtlto_cli.add_parser])
        try:
            args = dtlto_cli.with_env_options(args, os.environ)
        except GomaExtError as e:
            print(f"goma-ext: error: {e}", file=sys.stderr)
            return 2
        return run_cli(parser, args, (GomaExtError,))
    return run_cli(build_parser(), args, (GomaExtError,))


if __name__ == "__main__":
    sys.exit(main())
