"""A worker-local content-addressed file cache: verified, read-only files named by digest, linked into sandboxes.

Layout: DIR/{f,x}/ab/<sha256>-<size> (f: mode 0444, x: 0555; kept apart because hard links share one mode) and
DIR/tmp for files being written. A blob is hashed and refused unless it matches its digest, written once to a temp
file (under the fork lock, see forklock: ETXTBSY), closed, fsync'd (a crash must never leave a published name over
missing data), chmod'ed read-only, then published with link(2), which fails rather than replaces when another thread or
worker process published the same digest first (the loser drops its copy: duplicates are harmless). The directory
tree is 0700 and owned by the worker: never bound into a sandbox, never writable by the runner uid.

Fetches of large blobs are claimed (claim(): an flock on DIR/locks/<sha256>-<size>): the worker processes of a host
that start at once and all need the same compiler fetch it once, the others wait (CLAIM_PATIENCE_S at most) and
find it published. A lock file is empty, its lock is all it holds (released when its holder exits, however it
exits); its holder removes it when done, and a new FileCache removes those no one holds (a killed holder's). A
claim only saves work: losing a race on a lock file's name costs a second fetch, never a wrong file.

LRU by mtime: every use touches the file, so every process sharing the directory sees the same order. When the
bytes this process knows of exceed the bound, it rescans the directory and unlinks the least recently used files
down to EVICT_TO of the bound. Eviction is safe while sandboxes use a file: a sandbox holds its own hard link to the
inode, which keeps its data; only the cache's name goes. A lookup that loses the race with an eviction sees the
link fail (FileNotFoundError) and fetches again.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from goma_ext.errors import GomaExtError
from goma_ext.reapi.digest import Digest
from goma_ext.worker.forklock import FORK_LOCK, forks_passed
from thinlto_base.fsutil import process_running

LOG = logging.getLogger("goma_ext.worker")
GIB = 1 << 30
DEFAULT_MAX_BYTES = 10 * GIB
EVICT_TO = 0.9  # evict down to this fraction of the bound, so one eviction serves many inserts
TMP = "tmp"
LOCKS = "locks"
CLAIM_POLL_S = 0.05  # how often a claim waiting for another's fetch looks again (and at its deadline)
CLAIM_PATIENCE_S = 60.0  # then it fetches too: a holder stuck on a slow CAS must not fail every lease that waits
_NAME = re.compile(r"^([0-9a-f]{64})-([0-9]+)$")
_KINDS = {False: ("f", 0o444), True: ("x", 0o555)}


class FileCacheError(GomaExtError):
    """A blob offered to the cache does not match its digest, or the cache directory is unusable."""


def _name(digest: Digest) -> str:
    """A cached file's (and its lock's) name: never a path, whatever the digest holds (the worker's tree checks
    digests first; this holds for every caller)."""
    if not digest.well_formed:
        raise FileCacheError(f"malformed digest {digest.hash[:80]!r}/{digest.size}")
    return f"{digest.hash}-{digest.size}"


@dataclass(frozen=True)
class _Entry:
    path: Path
    size: int
    used: float  # mtime: the last use


class FileCache:
    """Files by digest under `root`, at most about `max_bytes` (0: unbounded); safe across threads and processes."""

    def __init__(self, root: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        try:
            for d in (root, root / TMP, root / LOCKS, root / "f", root / "x"):
                d.mkdir(mode=0o700, parents=True, exist_ok=True)
                os.chmod(d, 0o700)
            self._drop_temps()
            self._drop_stale_locks()
            self._total = sum(e.size for e in self._scan())
        except OSError as e:
            raise FileCacheError(f"file cache {root}: {e.strerror or e}") from e

    @property
    def total_bytes(self) -> int:
        return self._total

    def path(self, digest: Digest, executable: bool) -> Path:
        kind = _KINDS[executable][0]
        return self.root / kind / digest.hash[:2] / _name(digest)

    def get(self, digest: Digest, executable: bool) -> Path | None:
        """The cached file, its use recorded; None when absent."""
        p = self.path(digest, executable)
        try:
            os.utime(p)
        except FileNotFoundError:
            return None
        return p

    def put(self, digest: Digest, executable: bool, data: bytes) -> Path | None:
        """Verify `data` against `digest` and publish it; the file's path, or None when it does not fit the bound."""
        if not self.fits(digest):
            return None
        actual = Digest.of_bytes(data)
        if actual != digest:
            raise FileCacheError(f"blob {digest} has content {actual}: not cached")
        with FORK_LOCK:  # the fd is open for writing only while no child can be forked (ETXTBSY: see forklock)
            fd, tmp = tempfile.mkstemp(prefix=f"{os.getpid()}-", dir=self.root / TMP)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            except BaseException:
                os.unlink(tmp)
                raise
        return self._publish(digest, executable, tmp)

    def put_from(self, digest: Digest, executable: bool, fill: Callable[[BinaryIO], None]) -> Path | None:
        """put() for a blob too large to hold in memory: FILL writes it into a temporary file of the cache, and must
        verify what it writes (Cas.read_into does); the file's path, or None when it does not fit the bound."""
        if not self.fits(digest):
            return None
        fd, tmp = tempfile.mkstemp(prefix=f"{os.getpid()}-", dir=self.root / TMP)
        try:
            with os.fdopen(fd, "wb") as f:  # written without the fork lock: a download takes seconds
                fill(f)
            forks_passed()
            if os.stat(tmp).st_size != digest.size:
                raise FileCacheError(f"blob {digest} was written with {os.stat(tmp).st_size} bytes: not cached")
        except BaseException:
            os.unlink(tmp)
            raise
        return self._publish(digest, executable, tmp)

    def _publish(self, digest: Digest, executable: bool, tmp: str) -> Path:
        """The verified temporary file TMP, synced, made read-only and linked at its name (then TMP removed)."""
        final = self.path(digest, executable)
        try:
            fd = os.open(tmp, os.O_RDONLY | os.O_CLOEXEC)  # fsync through a read-only fd: no writer while it runs
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.chmod(tmp, _KINDS[executable][1])
            final.parent.mkdir(mode=0o700, exist_ok=True)
            try:
                os.link(tmp, final)
                added = True
            except FileExistsError:
                added = False  # published meanwhile by another thread or process: same bytes
        finally:
            os.unlink(tmp)
        if added:
            with self._lock:
                self._total += digest.size
                over = bool(self.max_bytes) and self._total > self.max_bytes
            if over:
                self.evict()
        return final

    def fits(self, digest: Digest) -> bool:
        """Whether put() would keep DIGEST's blob (not larger than the bound allows)."""
        return not (self.max_bytes and digest.size > self.max_bytes * EVICT_TO)

    @contextlib.contextmanager
    def claim(self, digest: Digest, waiting: Callable[[], None]) -> Iterator[None]:
        """Hold the fetch of DIGEST: another process or thread of this directory claiming it meanwhile waits (calling
        WAITING between looks, which may raise to give up; CLAIM_PATIENCE_S at most) until it is released, then
        should find it published. Claims of several digests must be taken in sorted order (no two claimants wait
        for each other)."""
        path = self.root / LOCKS / _name(digest)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise FileCacheError(f"file cache {self.root}: {e.strerror or e}") from e
        held = False
        try:
            give_up = time.monotonic() + CLAIM_PATIENCE_S
            while not held:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = True
                except BlockingIOError:
                    waiting()
                    if time.monotonic() >= give_up:
                        LOG.warning("file cache: another fetch of %s has taken %.0f s; fetching it too", digest,
                                    CLAIM_PATIENCE_S)
                        break
                    time.sleep(CLAIM_POLL_S)
            yield
        finally:
            if held:  # done: those waiting hold the old inode's lock next, and find the blob (or fetch it)
                with contextlib.suppress(FileNotFoundError):
                    if os.lstat(path).st_ino == os.fstat(fd).st_ino:  # still ours, not a later claimant's
                        path.unlink()
            os.close(fd)  # the lock goes with the descriptor

    def _drop_stale_locks(self) -> None:
        """Unlink lock files no one holds: a holder killed before removing its own."""
        for p in (self.root / LOCKS).iterdir():
            try:
                fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                p.unlink(missing_ok=True)
            except BlockingIOError:
                pass  # a live fetch's
            finally:
                os.close(fd)

    def evict(self) -> int:
        """Unlink least recently used files until the cache is under EVICT_TO of the bound; bytes freed."""
        with self._lock:
            entries = sorted(self._scan(), key=lambda e: e.used)
            total = sum(e.size for e in entries)
            goal = int(self.max_bytes * EVICT_TO)
            freed = 0
            for e in entries:
                if total - freed <= goal:
                    break
                try:
                    e.path.unlink()
                    freed += e.size
                except FileNotFoundError:
                    pass  # another worker process evicted it
            self._total = total - freed
        LOG.info("file cache %s: evicted %d bytes, %d bytes left", self.root, freed, self._total)
        return freed

    def _drop_temps(self) -> None:
        """Unlink temp files of dead writers (a killed worker's, never published); a live process's stay."""
        for p in (self.root / TMP).iterdir():
            pid = p.name.split("-", 1)[0]
            if not pid.isdigit() or int(pid) == os.getpid() or not process_running(int(pid)):
                p.unlink(missing_ok=True)

    def _scan(self) -> list[_Entry]:
        """Every published file; a file whose name, size or mode is wrong is dropped (never trusted)."""
        out: list[_Entry] = []
        for kind, mode in _KINDS.values():
            for sub in (self.root / kind).iterdir():
                for p in sub.iterdir():
                    try:
                        st = p.lstat()
                    except FileNotFoundError:
                        continue
                    m = _NAME.match(p.name)
                    good = m is not None and stat.S_ISREG(st.st_mode) and int(m.group(2)) == st.st_size
                    if good and stat.S_IMODE(st.st_mode) == mode:
                        out.append(_Entry(p, st.st_size, st.st_mtime))
                    else:
                        LOG.warning("file cache: dropping %s (not a published %s file)", p, kind)
                        p.unlink(missing_ok=True)
        return out
