#!/usr/bin/env python3
"""The example's executable link wrapper: `link_wrapper.py --output=OUT [--strip=STRIP (--symbols-file=|
--unstripped-file=)UNSTRIPPED] [--map-file=MAP] -- clang++ … -o UNSTRIPPED …`.

Runs the inner link, then writes OUT as a stripped copy of the unstripped binary, the contract of Chromium's
gcc_link_wrapper.py (both its old --unstripped-file and its new --symbols-file spelling).
"""

from __future__ import annotations

import argparse
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree when the link imports wrapper_common
from wrapper_common import run_link, strip_to  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--output", required=True)
    p.add_argument("--strip")
    p.add_argument("--symbols-file", "--unstripped-file", dest="unstripped")
    p.add_argument("--map-file")
    p.add_argument("command", nargs="+")
    args = p.parse_args()
    rc = run_link(args.command, args.map_file)
    if rc:
        return rc
    return strip_to(args.strip, args.unstripped or args.output, args.output)


if __name__ == "__main__":
    sys.exit(main())
