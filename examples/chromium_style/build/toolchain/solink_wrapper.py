#!/usr/bin/env python3
"""The example's shared-library link wrapper: `solink_wrapper.py --readelf=R --nm=N [--strip=S]
--tocfile=X.so.TOC --output=X.so [--symbols-file=|--sofile=]UNSTRIPPED [--map-file=M] -- clang++ -shared …`.

Runs the inner link, writes the table of contents (the SONAME line and every exported dynamic symbol with
its type) into the .TOC file only when it changed, and strips into --output. The rule has restat and the
.TOC is the library's depend_output, so dependents relink only when the exports change: the contract of
Chromium's gcc_solink_wrapper.py. Unlike Chromium's (`nm -p`, symbol table order), the symbols are sorted
by name: the .TOC then changes only when the exports do, not when the link lists its objects in another
order (lld orders .dynsym by when it first saw each symbol).
"""

from __future__ import annotations

import argparse
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree when the link imports wrapper_common
from wrapper_common import run_link, strip_to  # noqa: E402


def table_of_contents(readelf: str, nm: str, sofile: str) -> str:
    dynamic = subprocess.run([readelf, "-d", sofile], check=True, capture_output=True, text=True).stdout
    toc = "".join(line + "\n" for line in dynamic.splitlines() if "SONAME" in line)
    symbols = subprocess.run([nm, "--format=posix", "-g", "-D", sofile],
                             check=True, capture_output=True, text=True).stdout
    return toc + "".join(" ".join(line.split(" ", 2)[:2]) + "\n" for line in symbols.splitlines())


def update_if_changed(path: str, text: str) -> None:
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(text)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--readelf", required=True)
    p.add_argument("--nm", required=True)
    p.add_argument("--strip")
    p.add_argument("--tocfile", required=True)
    p.add_argument("--output", required=True)
    p.add_argument("--symbols-file", "--sofile", dest="unstripped")
    p.add_argument("--map-file")
    p.add_argument("command", nargs="+")
    args = p.parse_args()
    unstripped = args.unstripped or args.output
    rc = run_link(args.command, args.map_file)
    if rc:
        return rc
    update_if_changed(args.tocfile, table_of_contents(args.readelf, args.nm, unstripped))
    return strip_to(args.strip, unstripped, args.output)


if __name__ == "__main__":
    sys.exit(main())
