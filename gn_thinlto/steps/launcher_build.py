"""Compiling the step launcher (launcher.c) into a build directory: what the hook does at `gn gen` time."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import stat
import subprocess

from thinlto_base.fsutil import write_if_changed

LAUNCHER_SOURCE = os.path.join(os.path.dirname(os.path.realpath(__file__)), "launcher.c")
C_COMPILERS = ("cc", "gcc", "clang")  # then any clang-N on PATH (Debian's clang-19 has no plain `clang`)
# Launchers already compiled, one per source and compiler, for this user: `gn gen` of a new build directory copies
# one instead of compiling (~0.3 CPU s with cc -static; the test suite made ~200 build directories).
CACHE_SUBDIR = os.path.join("gn-thinlto", "step-launcher")


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
    cached = _cached(digest, cc)
    try:
        if not (cached and _copy(cached, tmp)):
            why = _compile(cc, tmp)
            if why:
                return why
            if cached:
                _store(tmp, cached)
        # As old as its source: the hook lists it among build.ninja's inputs (a deleted launcher makes ninja run
        # `gn gen` again, which builds it), and a launcher newer than build.ninja would make it do so every time.
        source = os.stat(LAUNCHER_SOURCE)
        os.utime(tmp, ns=(source.st_atime_ns, source.st_mtime_ns))
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
    write_if_changed(stamp, digest + "\n")
    return ""


def _compile(cc: str, dest: str) -> str:
    """launcher.c compiled by CC to DEST; "" or why not (one line)."""
    try:  # static where the C library allows it: no dynamic loader at each of its starts (~0.1 ms)
        for static in (["-static"], []):
            proc = subprocess.run([cc, "-O2", *static, "-o", dest, LAUNCHER_SOURCE], capture_output=True, text=True,
                                  timeout=120)
            if proc.returncode == 0:
                return ""
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{cc}: {e}"
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return f"{cc} failed on {LAUNCHER_SOURCE}: {lines[0] if lines else f'exit {proc.returncode}'}"


def _cached(digest: str, cc: str) -> str:
    """Where this user's cache keeps the launcher compiled from the source with DIGEST by CC (the compiler's
    path, size and modification time in the name: another compiler, or this one upgraded, compiles anew), or ""
    when there is no usable cache: $XDG_CACHE_HOME (else ~/.cache)/gn-thinlto/step-launcher, made 0700, used only
    while it is this user's own and no one else may write it, as every build directory's backend edges run what
    it holds."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return ""
    d = os.path.join(base, CACHE_SUBDIR)
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        st, compiler = os.lstat(d), os.stat(cc)
    except OSError:
        return ""
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        return ""
    key = hashlib.sha256(f"{digest}\0{os.path.realpath(cc)}\0{compiler.st_size}\0{compiler.st_mtime_ns}".encode())
    return os.path.join(d, key.hexdigest()[:32])


def _copy(cached: str, dest: str) -> bool:
    """The cached launcher copied to DEST (executable); False when there is none (or it cannot be read)."""
    try:
        shutil.copyfile(cached, dest)
        os.chmod(dest, 0o755)
        return True
    except OSError:
        return False


def _store(built: str, cached: str) -> None:
    """BUILT kept as CACHED for the next build directory: copied beside it, then renamed (never half a file)."""
    tmp = f"{cached}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        shutil.copyfile(built, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, cached)
    except OSError:
        if os.path.lexists(tmp):
            os.unlink(tmp)
