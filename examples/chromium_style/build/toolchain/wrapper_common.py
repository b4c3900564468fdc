"""What the example's link wrappers share (cf. Chromium's build/toolchain/wrapper_utils.py; our own code).

Standard library only: GN's ninja runs the wrappers with the system python3.
"""

from __future__ import annotations

import os
import subprocess


def run_link(command: list[str], map_file: str | None) -> int:
    """Run the inner link with LC_ALL=C (the linker's messages and sorting do not depend on the locale);
    --map-file asks lld for a link map."""
    if map_file:
        command = [*command, f"-Wl,-Map,{map_file}"]
    return subprocess.call(command, env={**os.environ, "LC_ALL": "C"})


def strip_to(strip: str | None, unstripped: str, output: str) -> int:
    """Write OUTPUT: a stripped copy of UNSTRIPPED, or nothing to do when they are the same file."""
    if strip:
        return subprocess.call([strip, "-o", output, unstripped])
    if os.path.abspath(unstripped) != os.path.abspath(output):
        raise SystemExit(f"wrapper: --output {output} differs from the linked file {unstripped}, but no --strip")
    return 0
