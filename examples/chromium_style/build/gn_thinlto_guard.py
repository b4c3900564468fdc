#!/usr/bin/env python3
"""Refuse a `gn gen` without gn-thinlto's hook in a build directory that gn-thinlto manages.

BUILDCONFIG.gn runs this with exec_script on every GN invocation (working directory: the build directory).
Without it, a plain `gn gen OUT` in a gn-thinlto build directory rewrites GN's ninja files with the
in-process LTO links and the next `ninja` silently builds something else. Any project can opt in by
copying this file and the exec_script call. Standard library only: GN runs it with its own python3.
"""

from __future__ import annotations

import os
import sys

STATE_DIR = "gn-thinlto"  # created in the build directory by the gn-thinlto hook
HOOK_FLAG = "--json-ide-script"


def gn_command_line() -> list[str]:
    """GN's own argv (GN runs exec_script programs directly, so it is our parent process)."""
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        return [a.decode("utf-8", "replace") for a in f.read().split(b"\0") if a]


def subcommand(argv: list[str]) -> str:
    """The first argument that is not a --flag: `gen`, `ls`, `desc`, …"""
    return next((a for a in argv[1:] if not a.startswith("-")), "")


def main() -> int:
    if not os.path.isdir(STATE_DIR):
        return 0  # not a gn-thinlto build directory: GN's own graph is what the user asked for
    try:
        argv = gn_command_line()
    except OSError:
        return 0  # no /proc: cannot tell, so do not get in the way
    if subcommand(argv) != "gen" or any(a.startswith(HOOK_FLAG) for a in argv):
        return 0
    print(
        f"gn-thinlto: {os.getcwd()} is a gn-thinlto build directory; `gn gen` without {HOOK_FLAG} would "
        "replace its ThinLTO graph with in-process LTO links. Run `gn-thinlto gen OUT` (or remove "
        f"OUT/{STATE_DIR} to go back to GN's own links).",
        file=sys.stderr,
    )
    return 1


if __name__ == "__main__":
    sys.exit(main())
