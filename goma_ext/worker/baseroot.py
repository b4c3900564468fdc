"""`goma-ext worker base-root DIR`: a minimal sandbox / (like distroless/cc) from the host's Debian packages.

Every file and symlink `dpkg -L` lists for the packages (default libc6, libgcc-s1, libstdc++6: the base system a
hermetic toolchain may assume), modes kept, under Debian 12's merged /usr (/lib -> usr/lib, /lib64 -> usr/lib64,
/bin -> usr/bin, /sbin -> usr/sbin), an ld.so.cache from `ldconfig -r`, and the empty mount points bwrap needs in
a read-only / (proc, dev, tmp, b). Built beside DIR and renamed into place, so DIR is whole or absent.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.worker.sandbox import BASE_ROOT_MOUNT_POINTS

DEFAULT_PACKAGES = ("libc6", "libgcc-s1", "libstdc++6")
MERGED_USR = ("bin", "sbin", "lib", "lib64")  # top-level symlinks into usr/ (Debian 12)
FORBIDDEN = ("llvm", "clang")  # a base root must not hold a toolchain: hermetic actions bring their own
LD_SO_CONF = "include /etc/ld.so.conf.d/*.conf\n"  # what libc-bin ships; libc6 brings the multiarch .conf


class BaseRootError(GomaExtError):
    """The base root cannot be built (one line)."""


@dataclass(frozen=True)
class Summary:
    files: int
    symlinks: int
    size_bytes: int

    def line(self, root: Path, packages: Sequence[str]) -> str:
        return (f"base root {root}: {len(packages)} packages ({', '.join(packages)}), {self.files} files, "
                f"{self.symlinks} symlinks, {self.size_bytes / 1e6:.1f} MB")


def package_paths(package: str) -> list[str]:
    """The absolute paths `dpkg -L` lists for an installed package (diversion notes dropped)."""
    proc = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["?"])[0].removeprefix("dpkg-query: ")  # the rest: a hint
        raise BaseRootError(f"package {package}: dpkg -L failed: {why}")
    return [line for line in proc.stdout.splitlines() if line.startswith("/")]


def destination(host_path: str) -> str:
    """Where a listed path goes in the base root: its directory through the merged-/usr links, relative."""
    parts = host_path.strip("/").split("/")
    if parts and parts[0] in MERGED_USR and len(parts) > 1:
        parts = ["usr", *parts]
    return "/".join(parts)


def _copy(src: str, dst: Path) -> tuple[int, int, int]:
    """Copy one listed path (file, symlink; directories are made as needed); (files, symlinks, bytes)."""
    try:
        st = os.lstat(src)
    except FileNotFoundError:
        return 0, 0, 0  # listed but not installed (dpkg path-exclude, e.g. docs on minimal images)
    if stat.S_ISDIR(st.st_mode):
        dst.mkdir(mode=0o755, parents=True, exist_ok=True)
        return 0, 0, 0
    if dst.is_symlink() or dst.exists():
        return 0, 0, 0  # listed by two packages or through /lib and /usr/lib
    dst.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    if stat.S_ISLNK(st.st_mode):
        os.symlink(os.readlink(src), dst)
        return 0, 1, 0
    if stat.S_ISREG(st.st_mode):
        shutil.copyfile(src, dst, follow_symlinks=False)
        os.chmod(dst, stat.S_IMODE(st.st_mode))
        return 1, 0, st.st_size
    return 0, 0, 0  # devices, fifos: never in these packages


def forbidden_paths(root: Path) -> list[str]:
    """Paths (or symlink targets) in the base root that name an LLVM or clang toolchain."""
    bad = []
    for top, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            rel = os.path.relpath(os.path.join(top, name), root)
            full = os.path.join(top, name)
            text = (rel + " -> " + os.readlink(full) if os.path.islink(full) else rel).lower()
            if any(word in text for word in FORBIDDEN):
                bad.append(rel)
    return sorted(bad)


def _skeleton(root: Path) -> None:
    for d in ("usr/bin", "usr/sbin", "usr/lib", "usr/lib64", "etc/ld.so.conf.d", *BASE_ROOT_MOUNT_POINTS):
        (root / d).mkdir(mode=0o755, parents=True, exist_ok=True)
    for top in MERGED_USR:
        os.symlink(f"usr/{top}", root / top)
    (root / "etc" / "ld.so.conf").write_text(LD_SO_CONF)


def _ldconfig(root: Path) -> None:
    ldconfig = shutil.which("ldconfig") or "/usr/sbin/ldconfig"
    proc = subprocess.run([ldconfig, "-r", str(root)], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not (root / "etc" / "ld.so.cache").is_file():
        why = (proc.stderr.strip().splitlines() or ["no ld.so.cache written"])[-1]
        raise BaseRootError(f"ldconfig -r {root} failed: {why} (it chroots: run as root)")


def build(target: Path, packages: Iterable[str]) -> Summary:
    """Build the base root at `target` (absent or an empty directory)."""
    names = list(dict.fromkeys(packages))
    if target.is_symlink() or (target.exists() and (not target.is_dir() or any(target.iterdir()))):
        raise BaseRootError(f"{target} exists and is not an empty directory; choose a new one")
    listed = {p: package_paths(p) for p in names}
    work = target.parent / f".{target.name}.tmp-{os.getpid()}"
    try:
        work.mkdir(mode=0o755, parents=True)
        _skeleton(work)
        files = links = size = 0
        for package in names:
            for path in listed[package]:
                f, s, n = _copy(path, work / destination(path))
                files, links, size = files + f, links + s, size + n
        _ldconfig(work)
        bad = forbidden_paths(work)
        if bad:
            raise BaseRootError(f"the base root would hold a toolchain ({len(bad)} paths, e.g. {bad[0]}): "
                                "drop the package that brings it")
        os.chmod(work, 0o755)
        if target.exists():
            target.rmdir()
        work.rename(target)
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return Summary(files, links, size)
