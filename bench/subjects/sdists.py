"""Real projects' sources from PyPI source distributions, pinned by version and sha256, fetched once."""

from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from bench.measure import BenchError, run

DEFAULT_CACHE = Path.home() / ".cache" / "gn-thinlto-bench"


@dataclass(frozen=True)
class Sdist:
    """PyPI package NAME==VERSION (sha256 pinned), whose project sources are in SUBDIR of the unpacked sdist."""

    name: str
    version: str
    sha256: str
    subdir: str

    @property
    def tarball(self) -> str:
        return f"{self.name}-{self.version}.tar.gz"


# ninja's C++ sources with their CMakeLists.txt and tests (ninja_test, GoogleTest).
NINJA = Sdist("ninja", "1.13.0", "4a40ce995ded54d9dc24f8ea37ff3bf62ad192b547f6c7126e7e25045e76f978", "ninja-upstream")
# libdeflate 1.26 (C) with its CMakeLists.txt and its test programs (ctest), as the `deflate` package bundles it.
LIBDEFLATE = Sdist("deflate", "0.9.0", "962e0a6f1ea3a94b900a8ea0ce138fa92bfcbafda5b86367104a259ffcd3462b", "libdeflate")


def debian_mirror(apt: Path = Path("/etc/apt")) -> str:
    """The Debian archive this machine's apt uses (deb822 `URIs:` or one-line `deb` sources), without a trailing /:
    no registry's address is written in the repository, every machine here has its own mirror configured."""
    uris: list[str] = []
    for path in sorted(glob.glob(str(apt / "sources.list.d" / "*.sources"))):
        for line in Path(path).read_text().splitlines():
            if line.startswith("URIs:"):
                uris += line.split()[1:]
    for path in [str(apt / "sources.list"), *sorted(glob.glob(str(apt / "sources.list.d" / "*.list")))]:
        if os.path.isfile(path):
            for line in Path(path).read_text().splitlines():
                words = line.split()
                if words[:1] == ["deb"]:
                    uris += [w for w in words[1:] if w.startswith(("http:", "https:"))][:1]
    for uri in uris:
        if uri.rstrip("/").endswith("/debian"):
            return uri.rstrip("/")
    raise BenchError(f"{apt}/sources.list*: no Debian archive (a URI ending in /debian) to fetch sources from")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(sdist: Sdist, cache: Path = DEFAULT_CACHE) -> Path:
    """CACHE/NAME-VERSION/SUBDIR (downloaded and checked once, reused afterwards)."""
    top = cache / f"{sdist.name}-{sdist.version}"
    if (top / sdist.subdir / "CMakeLists.txt").is_file():
        return top / sdist.subdir
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / f".{top.name}.lock", "a") as lock:  # runs at the same time take turns; one fetches
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (top / sdist.subdir / "CMakeLists.txt").is_file():
            return top / sdist.subdir
        tarball = cache / sdist.tarball
        if not tarball.is_file():
            # --no-binary for this package only: :all: would also build its build dependencies (cmake!) from source
            run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", sdist.name, "--no-deps",
                 f"{sdist.name}=={sdist.version}", "-d", str(cache)])
        unpack(tarball, sdist.sha256, f"{sdist.name}-{sdist.version}", top)
    return top / sdist.subdir


def unpack(tarball: Path, expected_sha256: str, member: str, top: Path) -> None:
    """Check TARBALL against EXPECTED_SHA256 (deleted on a mismatch) and make its top directory MEMBER the
    directory TOP (replaced, through a temporary directory beside it)."""
    got = sha256(tarball)
    if got != expected_sha256:
        tarball.unlink()
        raise BenchError(f"{tarball}: sha256 {got}, expected {expected_sha256} (deleted; run again)")
    tmp = top.with_name(f"{top.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with _OwnTarFile.open(tarball) as tar:
        _extract(tar, tmp)
    shutil.rmtree(top, ignore_errors=True)
    (tmp / member).rename(top)
    tmp.rmdir()


class _OwnTarFile(tarfile.TarFile):
    """A tar reader whose extracted files belong to whoever extracts them (as `tar --no-same-owner`): as root,
    tarfile would give each file the archive's uid/gid, i.e. to whichever local user has that uid."""

    def chown(self, tarinfo: tarfile.TarInfo, targetpath: str | bytes | os.PathLike[str] | os.PathLike[bytes],
              numeric_owner: bool) -> None:
        return None


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract only regular files and directories inside DEST, owned by the extracting user, without set-id or
    group/world write bits (the sha256 is pinned; this is belt and braces).

    tarfile's extraction filters need Python 3.11.4; Debian 12 ships 3.11.2, so the checks are done here.
    """
    if not isinstance(tar, _OwnTarFile):
        raise BenchError(f"{tar.name!r}: open archives with _OwnTarFile (it keeps no owner)")
    members = tar.getmembers()
    for member in members:
        parts = Path(member.name).parts
        if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
            raise BenchError(f"{tar.name!r}: unexpected member {member.name!r} (absolute, outside, or not a file)")
        member.mode &= 0o755
    tar.extractall(dest, members=members)  # every member checked above
