"""Debian packages the benchmarks need beyond the README's set-up, installed on first use like ./dev does."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from bench.measure import BenchError

# package -> a path it provides
PACKAGES = {"time": Path("/usr/bin/time"), "googletest": Path("/usr/src/googletest/googletest/src/gtest-all.cc")}


def ensure() -> None:
    missing = sorted(p for p, path in PACKAGES.items() if not path.exists())
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    if sudo and shutil.which("sudo") is None:
        raise BenchError(f"bench needs the Debian packages {', '.join(missing)}: apt-get install {' '.join(missing)}")
    print(f"bench: installing Debian packages {', '.join(missing)}", flush=True)
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in ([*sudo, "apt-get", "update"], [*sudo, "apt-get", "install", "-y", "--no-install-recommends", *missing]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise BenchError(f"{' '.join(cmd)} failed: {proc.stderr.strip().splitlines()[-1:]}")
