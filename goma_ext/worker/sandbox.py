"""Materialise an input root in a fresh directory and collect outputs, refusing any path that escapes it."""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.remote.cas import Cas
from goma_ext.remote.digest import Digest
from goma_ext.remote.merkle import BlobSource
from goma_ext.remote.proto import re_pb2
from goma_ext.worker.errors import bad_path
from goma_ext.worker.filecache import FileCache
from goma_ext.worker.forklock import FORK_LOCK

MAX_DEPTH = 64
FETCH_GROUP_BYTES = 64 << 20  # fetched and placed before the next group is read: the memory bound
# Smaller blobs are written directly, never cached. 0: measured, linking 1000 cached 4 KiB headers took 35 ms,
# writing them from memory 390 ms (copying from the cache 640 ms), before counting their download.
CACHE_MIN_BYTES = 0


def check_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise bad_path(f"input tree holds an invalid name {name!r}")
    return name


def inside(root: Path, rel: str, what: str) -> Path:
    """root/rel for a relative path that stays inside root (after normalisation and through existing symlinks)."""
    if posixpath.isabs(rel) or "\0" in rel:
        raise bad_path(f"{what} {rel!r} is absolute")
    norm = posixpath.normpath(rel) if rel else "."
    if norm == ".." or norm.startswith("../"):
        raise bad_path(f"{what} {rel!r} escapes the sandbox")
    full = root / norm
    real_root = root.resolve()
    try:
        resolved = full.resolve()
    except RuntimeError:  # a symlink loop (Python 3.11)
        raise bad_path(f"{what} {rel!r} runs into a symlink loop") from None
    if resolved != real_root and real_root not in resolved.parents:
        raise bad_path(f"{what} {rel!r} escapes the sandbox through a symlink")
    return full


def input_program(root: Path, workdir: str, program: str) -> Path:
    """The file a hermetic action's argv[0] (a path relative to its working directory) runs: inside the input
    root after every symlink, a regular file with an execute bit; else a Refusal (INVALID_ARGUMENT) saying why.
    Resolved as the kernel will: from the real working directory, `..` after a symlink physically."""
    what = "program"
    if posixpath.isabs(program) or "\0" in program:
        raise bad_path(f"{what} {program!r} is absolute: an uploaded program is named relative to the working "
                       "directory, inside the input root")
    inside(root, posixpath.join(workdir, program), what)  # textual escapes first: the clearest message
    real_root = root.resolve()
    workdir_real = inside(root, workdir, "working directory").resolve()
    try:
        real = (workdir_real / program).resolve()
    except RuntimeError:  # a symlink loop (Python 3.11)
        raise bad_path(f"{what} {program!r} runs into a symlink loop") from None
    if real != real_root and real_root not in real.parents:
        raise bad_path(f"{what} {program!r} resolves outside the input root (from the real working directory, "
                       "as exec would)")
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise bad_path(f"{what} {program!r} is not in the input root") from None
    except OSError as e:
        raise bad_path(f"{what} {program!r} cannot be resolved: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise bad_path(f"{what} {program!r} is not a regular file")
    if not st.st_mode & 0o111:
        raise bad_path(f"{what} {program!r} is not executable (is_executable is false in the input tree)")
    return real


def _fetch_directories(cas: Cas, root: Digest) -> dict[Digest, re_pb2.Directory]:
    dirs: dict[Digest, re_pb2.Directory] = {}
    level = {root}
    for _ in range(MAX_DEPTH):
        if not level:
            return dirs
        blobs = cas.read_many(level)
        nxt: set[Digest] = set()
        for d, data in blobs.items():
            msg = re_pb2.Directory()
            msg.ParseFromString(data)
            dirs[d] = msg
            nxt.update(Digest.from_proto(c.digest) for c in msg.directories)
        level = nxt - set(dirs)
    raise bad_path(f"input tree deeper than {MAX_DEPTH} levels")


@dataclass
class Materialised:
    """What materialise() did: files placed, and of those how many (and bytes) came from the file cache without a
    download, and how many were downloaded."""

    files: int = 0
    cached: int = 0
    cached_bytes: int = 0
    fetched: int = 0
    fetched_bytes: int = 0


def materialise(
    cas: Cas, root: Digest, sandbox: Path, cache: FileCache | None = None, share: bool = False
) -> Materialised:
    """Write the tree rooted at `root` under the (empty) sandbox. With a cache, files come from it (fetched into it
    first when missing); `share` hard-links them (only when the action runs as a uid that cannot write the
    root-owned, read-only cache files), else they are copied."""
    dirs = _fetch_directories(cas, root)
    files: list[tuple[Path, Digest, bool]] = []
    links: list[tuple[Path, str, str]] = []

    def walk(d: Digest, path: Path, rel: str) -> None:
        path.mkdir(exist_ok=True)
        msg = dirs[d]
        for f in msg.files:
            files.append((path / check_name(f.name), Digest.from_proto(f.digest), f.is_executable))
        for s in msg.symlinks:
            links.append((path / check_name(s.name), s.target, posixpath.join(rel, s.name)))
        for c in msg.directories:
            walk(Digest.from_proto(c.digest), path / check_name(c.name), posixpath.join(rel, c.name))

    walk(root, sandbox, "")
    for link, target, rel in links:
        if posixpath.isabs(target):
            raise bad_path(f"input symlink {rel} -> {target} is absolute")
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if joined == ".." or joined.startswith("../"):
            raise bad_path(f"input symlink {rel} -> {target} escapes the sandbox")
        os.symlink(target, link)
    placer = _Placer(sandbox, cache, share)
    missing: dict[Digest, list[tuple[Path, bool]]] = {}
    for path, d, executable in files:
        placer.check_free(path)
        if not placer.from_cache(path, d, executable):
            missing.setdefault(d, []).append((path, executable))
    for group in _groups(sorted(missing)):
        blobs = cas.read_many(group)
        for d in group:
            placer.stats.fetched += 1
            placer.stats.fetched_bytes += d.size
            for path, executable in missing[d]:
                placer.place_new(path, d, executable, blobs[d])
        del blobs
    placer.stats.files = len(files)
    return placer.stats


def _groups(digests: Sequence[Digest]) -> list[list[Digest]]:
    """Digests in fetch groups of at most FETCH_GROUP_BYTES (a larger blob alone): bounds the worker's memory."""
    groups: list[list[Digest]] = []
    size = 0
    for d in digests:
        if not groups or size + d.size > FETCH_GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(d)
        size += d.size
    return groups


class _Placer:
    """Puts one input file in the sandbox: from the cache (link or copy), or written from fetched bytes."""

    def __init__(self, sandbox: Path, cache: FileCache | None, share: bool) -> None:
        self.sandbox, self.cache, self.share = sandbox, cache, share
        self.stats = Materialised()

    def check_free(self, path: Path) -> None:
        if path.is_symlink() or path.exists():
            raise bad_path(f"input {path.relative_to(self.sandbox)} is listed twice")

    def _cacheable(self, d: Digest) -> bool:
        return self.cache is not None and d.size >= CACHE_MIN_BYTES

    def from_cache(self, path: Path, d: Digest, executable: bool) -> bool:
        if not self._cacheable(d) or self.cache is None:
            return False
        cached = self.cache.get(d, executable)
        if cached is None or not self._place(cached, path, executable):
            return False
        self.stats.cached += 1
        self.stats.cached_bytes += d.size
        return True

    def place_new(self, path: Path, d: Digest, executable: bool, data: bytes) -> None:
        self.check_free(path)  # the same path can be listed twice in one fetch group
        if self._cacheable(d) and self.cache is not None:
            cached = self.cache.put(d, executable, data)
            if cached is not None and self._place(cached, path, executable):
                return
        with FORK_LOCK:  # no child forked meanwhile holds the file open for writing (ETXTBSY)
            path.write_bytes(data)
        if executable:
            path.chmod(0o755)

    def _place(self, cached: Path, path: Path, executable: bool) -> bool:
        """Link (or copy) a cache file to path; False when it vanished (evicted meanwhile)."""
        try:
            if self.share:
                try:
                    os.link(cached, path)
                    return True
                except OSError as e:
                    if e.errno not in (errno.EXDEV, errno.EMLINK):  # another file system; too many links
                        raise
            with FORK_LOCK:
                shutil.copyfile(cached, path)
            os.chmod(path, 0o755 if executable else 0o644)
            return True
        except FileNotFoundError:
            return False


def collect_outputs(
    workdir: Path, sandbox: Path, outputs: Sequence[str]
) -> tuple[list[re_pb2.OutputFile], dict[Digest, BlobSource]]:
    """Each output file (relative to workdir) and its blob to upload; refuse symlinks and paths outside the sandbox."""
    found: list[tuple[str, Path, bool]] = []
    for out in outputs:
        full = inside(sandbox, os.path.relpath(workdir / out, sandbox) if not posixpath.isabs(out) else out, "output")
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            continue  # REAPI: a missing output is simply absent from the result
        if not stat.S_ISREG(st.st_mode):
            raise bad_path(f"output {out!r} is not a regular file")
        found.append((out, full, bool(st.st_mode & stat.S_IXUSR)))
    digests = {out: Digest.of_file(full) for out, full, _ in found}
    blobs = {digests[out]: BlobSource(path=full) for out, full, _ in found}
    files = [
        re_pb2.OutputFile(path=out, digest=digests[out].to_proto(), is_executable=x) for out, _, x in sorted(found)
    ]
    return files, blobs
