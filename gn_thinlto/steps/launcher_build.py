"""Compiling the step launcher (launcher.c) into a build directory: what the hook does at `gn gen` time."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess

from thinlto_base.fsutil import write_if_changed

LAUNCHER_SOURCE = os.path.join(os.path.dirname(os.path.realpath(__file__)), "launcher.c")
C_COMPILERS = ("cc", "gcc", "clang")  # then any clang-N on PATH (Debian's clang-19 has no plain `clang`)


def c_compiler() -> str:
    """A C compiler on PATH, or ""."""
    for name in C_COMPILERS:
        found = shutil.which(name)
        if found:
            return found
    for d in os.environ.get("PATH", "").split(os.pathsep):
        versions = sorted(glob.glob(os.path.join(d or ".", "clang-[0-9]*")), reverse=True)
        if versions:
            return versions[0]
    return ""


def build_launcher(out_dir: str, dest: str) -> str:
    """Compile the step launcher to DEST (relative to the build directory OUT_DIR) unless it is there already,
    built from the same source; "" when it is, else why it cannot be (one line)."""
    with open(LAUNCHER_SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    path = os.path.join(out_dir, dest)
    stamp = f"{path}.sha256"
    try:
        with open(stamp) as f:
            if f.read().strip() == digest and os.access(path, os.X_OK):
                return ""
    except OSError:
        pass
    cc = c_compiler()
    if not cc:
        return "no C compiler on PATH (cc, gcc, clang or clang-N)"
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:  # static where the C library allows it: no dynamic loader at each of its starts (~0.1 ms)
        for static in (["-static"], []):
            proc = subprocess.run([cc, "-O2", *static, "-o", tmp, LAUNCHER_SOURCE], capture_output=True, text=True,
                                  timeout=120)
            if proc.returncode == 0:
                break
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{cc}: {e}"
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        return f"{cc} failed on {LAUNCHER_SOURCE}: {lines[0] if lines else f'exit {proc.returncode}'}"
    # As old as its source: the hook lists it among build.ninja's inputs (a deleted launcher makes ninja run
    # `gn gen` again, which builds it), and a launcher newer than build.ninja would make it do so every time.
    source = os.stat(LAUNCHER_SOURCE)
    os.utime(tmp, ns=(source.st_atime_ns, source.st_mtime_ns))
    os.replace(tmp, path)
    write_if_changed(stamp, digest + "\n")
    return ""
