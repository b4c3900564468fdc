"""Materialise an input root in a fresh directory and collect outputs, refusing any path that escapes it.

Materialising happens before the action runs, in a directory only root can write: every entry is created by us,
exclusively (O_EXCL: never through a name that exists), and every input symlink is resolved as the kernel will
resolve it before any file is placed. Outputs are read after the action, when the tree is the action's: through
`beneath`, which follows no symlink on the way.
"""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from goma_ext.reapi.cas import Cas
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import re_pb2
from goma_ext.worker import beneath
from goma_ext.worker.errors import bad_path
from goma_ext.worker.filecache import FileCache
from goma_ext.worker.forklock import FORK_LOCK, forks_passed
from goma_ext.worker.inputtree import (
    NO_DEADLINE,
    Deadline,
    TreeBounds,
    check_name,
    disk_lookup,
    fetch,
    resolve_link,
    too_large,
)
from thinlto_base import safefs

MAX_DEPTH = 64
DEFAULT_TREE_BOUNDS = TreeBounds(nodes=500_000, file_bytes=32 << 30, depth=MAX_DEPTH)
FETCH_GROUP_BYTES = 64 << 20  # fetched and placed before the next group is read: the memory bound
# Smaller blobs are written directly, never cached. 0: measured, linking 1000 cached 4 KiB headers took 35 ms,
# writing them from memory 390 ms (copying from the cache 640 ms), before counting their download.
CACHE_MIN_BYTES = 0
# Fetches of inputs this large are claimed in the file cache: the workers of a host that all start on the same
# toolchain (hundreds of MB) fetch it once between them, not once each
CLAIM_MIN_BYTES = 1 << 20
DEADLINE_EVERY = 1024  # entries placed between two looks at the deadline

__all__ = ["Outputs", "check_name", "collect_outputs", "input_program", "inside", "materialise"]


def inside(root: Path, rel: str, what: str) -> Path:
    """root/rel for a relative path that stays inside root as text (checked before the tree exists; the path is
    later created and read through `beneath`, which refuses any symlink on the way)."""
    if posixpath.isabs(rel) or "\0" in rel:
        raise bad_path(f"{what} {rel!r} is absolute")
    norm = posixpath.normpath(rel) if rel else "."
    if norm == ".." or norm.startswith("../"):
        raise bad_path(f"{what} {rel!r} escapes the sandbox")
    return root / norm


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
    cas: Cas, root: Digest, sandbox: Path, cache: FileCache | None = None, share: bool = False,
    bounds: TreeBounds = DEFAULT_TREE_BOUNDS, deadline: Deadline = NO_DEADLINE,
) -> Materialised:
    """Write the tree rooted at `root` under the (empty) sandbox, after checking it against `bounds` and its
    symlinks as the kernel resolves them. With a cache, files come from it (fetched into it first when missing);
    `share` hard-links them (only when the action runs as a uid that cannot write the root-owned, read-only cache
    files), else they are copied. Past `deadline`, RemoteError(DEADLINE_EXCEEDED)."""
    dirs = fetch(cas, root, bounds, deadline)
    files: list[tuple[Path, Digest, bool]] = []
    links: list[tuple[Path, str, str]] = []

    def walk(d: Digest, path: Path, rel: str) -> None:
        if path != sandbox:
            os.mkdir(path, 0o755)  # each name is used once per directory (checked): never there yet
        if len(files) % DEADLINE_EVERY == 0:
            deadline.check("creating the input tree")
        msg = dirs[d]
        for f in msg.files:
            files.append((path / f.name, Digest.from_proto(f.digest), f.is_executable))
        for s in msg.symlinks:
            links.append((path / s.name, s.target, posixpath.join(rel, s.name)))
        for c in msg.directories:
            walk(Digest.from_proto(c.digest), path / c.name, posixpath.join(rel, c.name))

    sandbox.mkdir(mode=0o700, exist_ok=True)
    walk(root, sandbox, "")
    for n, (link, target, _rel) in enumerate(links):
        if n % DEADLINE_EVERY == 0:
            deadline.check("creating the input symlinks")
        if posixpath.isabs(target):
            raise bad_path(f"input symlink {_rel} -> {target} is absolute")
        os.symlink(target, link)
    look = disk_lookup(sandbox)
    for _link, target, rel in links:  # every link in place first: a chain resolves through the others
        deadline.check("checking the input symlinks")  # each link too: many short ones add up as well
        resolve_link(rel, target, look, deadline)
    placer = _Placer(sandbox, cache, share)
    missing: dict[Digest, list[tuple[Path, bool]]] = {}
    for n, (path, d, executable) in enumerate(files):
        if n % DEADLINE_EVERY == 0:
            deadline.check("placing the input files")
        if not placer.from_cache(path, d, executable):
            missing.setdefault(d, []).append((path, executable))
    for group in _groups(sorted(missing)):
        deadline.check("fetching the input files")
        with ExitStack() as claims:
            if cache is not None:  # in sorted order (the group is): see FileCache.claim
                for d in group:
                    if d.size >= CLAIM_MIN_BYTES and placer.cacheable(d) and cache.fits(d):
                        claims.enter_context(cache.claim(d, lambda: deadline.check("waiting for another fetch")))
                        missing[d] = [(p, x) for p, x in missing[d] if not placer.from_cache(p, d, x)]
            to_read = [d for d in group if missing[d]]
            large = [d for d in to_read if d.size > FETCH_GROUP_BYTES]  # alone in its group (_groups)
            blobs = cas.read_many([d for d in to_read if d not in large])
            for d in to_read:
                placer.stats.fetched += 1
                placer.stats.fetched_bytes += d.size
                if d in large:
                    placer.place_streamed(d, missing[d], cas)
                    continue
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


def _create(path: Path, executable: bool) -> int:
    """A new file at path, opened for writing: O_EXCL, so never through an existing name or symlink."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o755 if executable else 0o644)
    except FileExistsError:
        raise bad_path(f"input {path.name!r} is listed twice") from None


class _Placer:
    """Puts one input file in the sandbox: from the cache (link or copy), or written from fetched bytes."""

    def __init__(self, sandbox: Path, cache: FileCache | None, share: bool) -> None:
        self.sandbox, self.cache, self.share = sandbox, cache, share
        self.stats = Materialised()

    def cacheable(self, d: Digest) -> bool:
        return self.cache is not None and d.size >= CACHE_MIN_BYTES

    def from_cache(self, path: Path, d: Digest, executable: bool) -> bool:
        if not self.cacheable(d) or self.cache is None:
            return False
        cached = self.cache.get(d, executable)
        if cached is None or not self._place(cached, path, executable):
            return False
        self.stats.cached += 1
        self.stats.cached_bytes += d.size
        return True

    def place_new(self, path: Path, d: Digest, executable: bool, data: bytes) -> None:
        if self.cacheable(d) and self.cache is not None:
            cached = self.cache.put(d, executable, data)
            if cached is not None and self._place(cached, path, executable):
                return
        with FORK_LOCK:  # no child forked meanwhile holds the file open for writing (ETXTBSY)
            fd = _create(path, executable)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)

    def place_streamed(self, d: Digest, targets: list[tuple[Path, bool]], cas: Cas) -> None:
        """A blob larger than a fetch group, at each of TARGETS: streamed from the CAS to disk once, never whole in
        memory (a client's input may be as large as --max-input-bytes), into the cache when it keeps it, else into
        the first target; the other targets get it from there."""
        have: Path | None = None  # a file that holds the blob, once fetched

        def fill(f: BinaryIO) -> None:
            if have is not None:  # the cache keeps executables and other files apart: the second kind, a copy
                try:
                    with open(have, "rb") as src:
                        shutil.copyfileobj(src, f)
                    return
                except FileNotFoundError:  # evicted meanwhile: fetched again (read_into starts the file over)
                    pass
            cas.read_into(d, f)

        for path, executable in targets:
            if self.from_cache(path, d, executable):  # fetched for an earlier target
                continue
            if self.cacheable(d) and self.cache is not None:
                cached = self.cache.put_from(d, executable, fill)
                if cached is not None and self._place(cached, path, executable):
                    have = have or cached
                    continue
            if have is not None:
                self._copy(have, path, executable)
                continue
            fd = _create(path, executable)  # written without the fork lock: a download takes seconds
            with os.fdopen(fd, "wb") as f:
                cas.read_into(d, f)
            forks_passed()
            have = path

    def _copy(self, src_path: Path, path: Path, executable: bool) -> None:
        src = os.open(src_path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            dst = _create(path, executable)  # copied without the fork lock: a large file takes a while
            try:
                safefs.copy_fd(src, dst)
            finally:
                os.close(dst)
            forks_passed()
        finally:
            os.close(src)

    def _place(self, cached: Path, path: Path, executable: bool) -> bool:
        """Link (or copy) a cache file to path; False when it vanished (evicted meanwhile)."""
        try:
            if self.share:
                try:
                    os.link(cached, path, follow_symlinks=False)
                    return True
                except FileExistsError:
                    raise bad_path(f"input {path.name!r} is listed twice") from None
                except OSError as e:
                    if e.errno not in (errno.EXDEV, errno.EMLINK):  # another file system; too many links
                        raise
            self._copy(cached, path, executable)
            return True
        except FileNotFoundError:
            return False


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


@dataclass
class Outputs:
    """The outputs found after an action: OutputFile records, and blobs read through descriptors opened without
    following links (kept open until close(): the upload reads /proc/self/fd/N, the very file that was checked)."""

    files: list[re_pb2.OutputFile] = field(default_factory=list)
    blobs: dict[Digest, BlobSource] = field(default_factory=dict)
    fds: list[int] = field(default_factory=list)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()


def collect_outputs(root_fd: int, outputs: Mapping[str, str], max_bytes: int) -> Outputs:
    """Each output file (`outputs`: its path relative to the input root `root_fd` -> the name it is reported by)
    and its blob to upload.
    Refused: a symlink anywhere on an output's path or at its name, anything but a regular file, and outputs larger
    than `max_bytes` together (RESOURCE_EXHAUSTED). A missing output is simply absent (REAPI)."""
    found = Outputs()
    total = 0
    try:
        for rel, out in sorted(outputs.items(), key=lambda item: item[1]):
            fd = beneath.open_regular(root_fd, rel, f"output {out!r}: path")
            if fd is None:
                continue
            found.fds.append(fd)
            st = os.fstat(fd)
            total += st.st_size
            if max_bytes and total > max_bytes:
                raise too_large(f"the action's outputs exceed {max_bytes} bytes together (the worker's "
                                "--max-output-bytes)")
            source = Path(f"/proc/self/fd/{fd}")
            digest = Digest.of_file(source)
            found.blobs[digest] = BlobSource(path=source)
            found.files.append(re_pb2.OutputFile(path=out, digest=digest.to_proto(),
                                                 is_executable=bool(st.st_mode & stat.S_IXUSR)))
        return found
    except BaseException:
        found.close()
        raise
