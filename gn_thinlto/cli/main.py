"""The `gn-thinlto` command line: generate, build the example, explain and report ThinLTO graphs, compare builds."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gn_thinlto.cli import cache, example, explain, gen, parity, report, trace
from gn_thinlto.errors import GnThinltoError
from goma_ext.cliapp import build_parser as _build_parser
from goma_ext.cliapp import run_cli
from goma_ext.errors import GomaExtError


def build_parser() -> argparse.ArgumentParser:
    return _build_parser(
        "gn-thinlto", __doc__,
        [example.add_parser, gen.add_parser, explain.add_parser, cache.add_parser, trace.add_parser,
         report.add_parser, parity.add_parser],
    )


def main(argv: Sequence[str] | None = None) -> int:
    # gn-thinlto commands call into goma_ext (index decoding, remote settings): its errors are ours to show too.
    return run_cli(build_parser(), argv, (GnThinltoError, GomaExtError))


if __name__ == "__main__":
    sys.exit(main())
