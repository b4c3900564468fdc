"""Compiling the step launcher (launcher.c) into a build directory: what the hook does at `gn gen` time."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import stat
import subprocess

from thinlto_base.fsutil import write_if_changed
from thinlto_base.trust import Trust, Untrusted

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
    when there is no usable cache. It is $XDG_CACHE_HOME (else ~/.cache)/gn-thinlto/step-launcher, made 0700, and
    used only while it and every directory above it belong to this user or root and no one else may write them
    (as ssh checks ~/.ssh): every build directory's backend edges run what it holds, so no other user may be able
    to put a file there or swap a directory on the way."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    if not os.path.isabs(base):
        return ""
    d = os.path.join(base, CACHE_SUBDIR)
    try:
        old = os.umask(0o077)
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
        finally:
            os.umask(old)
        compiler = os.stat(cc)
        if not (_private_path(d) and _private_path(os.path.realpath(d))) or os.stat(d).st_uid != os.geteuid():
            return ""
    except (OSError, RecursionError):
        return ""
    source = b"\0".join([digest.encode(), os.fsencode(os.path.realpath(cc)), b"%d" % compiler.st_size,
                         b"%d" % compiler.st_mtime_ns])
    return os.path.join(d, hashlib.sha256(source).hexdigest()[:32])


def _private_path(path: str) -> bool:
    """PATH and each entry above it, as written (not following links): of this user or root, and directories no
    one else may write (the backend cache's default trust, thinlto_base.trust; a link's mode means nothing).
    Checked both as written and resolved, no one else can change where the path leads."""
    trust = Trust()
    while True:
        st = os.lstat(path)
        try:
            if stat.S_ISLNK(st.st_mode):
                if not trust.trusts(st.st_uid):
                    return False
            elif not stat.S_ISDIR(st.st_mode):
                return False
            else:
                trust.check(st)
        except Untrusted:
            return False
        parent = os.path.dirname(path)
        if parent == path:
            return True
        path = parent


def _copy(cached: str, dest: str) -> bool:
    """The cached launcher copied to DEST (executable); False when there is none, or it is not a regular file of
    this user's that no one else may write, or not an ELF file (anything amiss: the caller compiles)."""
    try:
        with os.fdopen(os.open(cached, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
                return False
            data = f.read()
    except OSError:
        return False
    if not data.startswith(b"\x7fELF"):
        return False
    try:
        with open(dest, "wb") as out:
            out.write(data)
        os.chmod(dest, 0o755)
        return True
    except OSError:
        return False


def _store(built: str, cached: str) -> None:
    """BUILT kept as CACHED for the next build directory: written beside it, synced, then renamed (never half a
    file, also after a crash)."""
    tmp = f"{cached}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
    try:
        with open(built, "rb") as f:
            data = f.read()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o755)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, cached)
    except OSError:
        if os.path.lexists(tmp):
            os.unlink(tmp)
