"""Pruning the backend cache to its policy (thinlto_base.policy): expired entries first, then the least recently used
until the byte and file limits hold. An entry goes with its blobs (an untrusted writer's entry only with the blobs
that writer owns); stale temporary files of writers that died mid-store go too.

The backend step calls prune_if_due after a miss (never on a hit), at most once per prune_interval across
every process sharing the cache (a timestamp file and a non-blocking lock); `gn-thinlto cache trim` calls
prune directly. Standard library only.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

from thinlto_base.policy import CachePolicy, parse_policy
from thinlto_base.safefs import open_dir, open_nofollow, read_regular, unlink_quiet
from thinlto_base.store import AC_DIR, CAS_DIR, ENTRY_CAP
from thinlto_base.trust import Trust, Untrusted

T = TypeVar("T")
STAMP = ".last-prune"
LOCK = ".prune.lock"
STALE_TMP_S = 3600  # a temporary file this old belongs to a writer that is gone
# A prune takes seconds; a lock held while the last prune is this much older than the interval is ignored. flock
# needs only a read-only open, so whoever can read the cache can hold the lock, and pruning would otherwise stop.
PRUNE_LOCK_PATIENCE_S = 3600


class PruneResult:
    __slots__ = ("blobs_removed", "bytes_kept", "bytes_removed", "entries_kept", "entries_removed", "tmp_removed")

    def __init__(self) -> None:
        self.entries_removed = self.blobs_removed = self.bytes_removed = self.entries_kept = self.bytes_kept = 0
        self.tmp_removed = 0


class CacheFile:
    """One file of the cache, found by `scan`: its fan-out directory (ac/KK or cas/DD), name and lstat."""

    __slots__ = ("fan", "name", "st", "top")

    def __init__(self, top: str, fan: str, name: str, st: os.stat_result | None) -> None:
        self.top, self.fan, self.name, self.st = top, fan, name, st

    def remove(self, root_fd: int) -> None:
        """Unlink it, reaching its directory again without following links (a directory swapped for a link
        since the scan is refused, not followed)."""
        remove(root_fd, self.top, self.fan, self.name)


def _in_fan(root_fd: int, top: str, fan: str, act: Callable[[int], T]) -> T:
    """ACT on the fd of TOP/FAN below ROOT_FD, reached without following a link on the way (OSError when refused)."""
    top_fd = open_dir(root_fd, top)
    try:
        fan_fd = open_dir(top_fd, fan)
        try:
            return act(fan_fd)
        finally:
            os.close(fan_fd)
    finally:
        os.close(top_fd)


def remove(root_fd: int, top: str, fan: str, name: str) -> None:
    """Unlink TOP/FAN/NAME below ROOT_FD without following a link on the way; quiet when gone or refused."""
    try:
        _in_fan(root_fd, top, fan, lambda fan_fd: unlink_quiet(name, fan_fd))
    except OSError:
        pass


def scan(root_fd: int, top: str, now: float, result: PruneResult | None = None, stat: bool = True,
         sweep: bool = True) -> list[CacheFile]:
    """Every file in TOP/XX/ below ROOT_FD, with its lstat when STAT (else None: the listing alone, no call per
    file); links are listed as what they are, never followed. With SWEEP, temporary files (dot names) older
    than STALE_TMP_S, left by writers killed mid-store, are removed."""
    found: list[CacheFile] = []
    try:
        top_fd = open_dir(root_fd, top)
    except FileNotFoundError:
        return found
    try:
        with os.scandir(top_fd) as fans:
            fan_names = [f.name for f in fans if f.is_dir(follow_symlinks=False)]
        for fan in fan_names:
            try:
                fan_fd = open_dir(top_fd, fan)
            except OSError:
                continue  # swapped for a link since the listing: not ours to enter
            try:
                with os.scandir(fan_fd) as files:
                    for f in files:
                        dot = f.name.startswith(".")
                        try:
                            st = f.stat(follow_symlinks=False) if stat or dot else None
                        except FileNotFoundError:
                            continue
                        if dot:
                            if sweep and st is not None and now - st.st_mtime > STALE_TMP_S:
                                unlink_quiet(f.name, fan_fd)
                                if result is not None:
                                    result.tmp_removed += 1
                            continue
                        found.append(CacheFile(top, fan, f.name, st))
            finally:
                os.close(fan_fd)
    finally:
        os.close(top_fd)
    return found


def entry_blobs(root_fd: int, f: CacheFile) -> list[tuple[str, str]]:
    """(digest, size) of each blob the entry F names, from its text (not verified: for pruning); [] when it
    cannot be read (a link, a FIFO, too large, gone)."""
    try:
        text = _in_fan(root_fd, f.top, f.fan, lambda fan_fd: read_regular(f.name, fan_fd, ENTRY_CAP)[0]).decode(
            errors="replace")
    except OSError:
        return []
    return [(p[1], p[2]) for p in (line.split(" ") for line in text.split("\n")[1:]) if len(p) == 3]


def _size_limit(root: str, policy: CachePolicy, used: int) -> int:
    """The byte limit: the smaller of cache_size (% of the cache's own size plus the free space) and
    cache_size_bytes; 0 for none."""
    limits = []
    if policy.percent:
        st = os.statvfs(root)
        limits.append((used + st.f_bavail * st.f_frsize) * policy.percent // 100)
    if policy.max_bytes:
        limits.append(policy.max_bytes)
    return min(limits) if limits else 0


def _owner(root_fd: int, f: CacheFile) -> int | None:
    """F's owner (lstat, reached without following a link), or None when it cannot be looked at."""
    try:
        st = _in_fan(root_fd, f.top, f.fan, lambda fan_fd: os.stat(f.name, dir_fd=fan_fd, follow_symlinks=False))
        return st.st_uid
    except OSError:
        return None


def _trusted(trust: Trust, st: os.stat_result) -> bool:
    try:
        trust.check(st)
    except Untrusted:
        return False
    return True


def prune(root: str, policy: CachePolicy, now: float | None = None, trust: Trust | None = None) -> PruneResult:
    """Bring ROOT within POLICY now. An entry goes with the blobs it names; one whose writer TRUST (default: this user
    and root) does not trust, only with the blobs its writer owns: in a cache others may write, anyone could plant
    an old entry naming another's blobs, and the next prune, by a user allowed to remove them, would take those
    blobs with it."""
    now = time.time() if now is None else now
    trust = trust if trust is not None else Trust()
    result = PruneResult()
    root_fd = open_dir(root)
    try:
        entries = [(f.st.st_mtime, f.st.st_size, f.name, f) for f in scan(root_fd, AC_DIR, now, result) if f.st]
        entries.sort(key=lambda e: e[:3])  # least recently used first
        blobs = {}
        for f in scan(root_fd, CAS_DIR, now, result, stat=False):
            named_size = f.name.rpartition("-")[2]
            if named_size.isdigit():  # the size from the name: a blob's bytes without a stat per blob
                blobs[f.name] = (f, int(named_size))
        used_bytes = sum(b[1] for b in blobs.values()) + sum(e[1] for e in entries)
        files = len(blobs) + len(entries)
        limit = _size_limit(root, policy, used_bytes)
        for mtime, size, _, f in entries:
            expired = policy.expiration_s and now - mtime > policy.expiration_s
            too_big = limit and used_bytes > limit
            too_many = policy.max_files and files > policy.max_files
            if not (expired or too_big or too_many):
                break  # entries are in LRU order: every later one is newer and the limits hold
            named = entry_blobs(root_fd, f)
            writer = None if f.st is None or _trusted(trust, f.st) else f.st.st_uid  # None: any blob it names
            f.remove(root_fd)
            used_bytes, files = used_bytes - size, files - 1
            result.entries_removed += 1
            for digest, blob_size in named:
                key = f"{digest}-{blob_size}"
                if key in blobs and writer is not None and _owner(root_fd, blobs[key][0]) != writer:
                    continue  # another's blob, named by an entry we do not trust: not its to take
                blob = blobs.pop(key, None)
                if blob is not None:
                    blob[0].remove(root_fd)
                    used_bytes, files = used_bytes - blob[1], files - 1
                    result.blobs_removed += 1
                    result.bytes_removed += blob[1]
    finally:
        os.close(root_fd)
    result.entries_kept = len(entries) - result.entries_removed
    result.bytes_kept = used_bytes
    return result


def _held_too_long(root_fd: int, policy: CachePolicy) -> bool:
    """True when the last prune began more than the interval and PRUNE_LOCK_PATIENCE_S ago, so that the prune lock's
    holder is no prune (or a hung one): pruning then goes on without the lock."""
    try:
        last = os.stat(STAMP, dir_fd=root_fd, follow_symlinks=False).st_mtime
    except FileNotFoundError:
        last = os.stat(LOCK, dir_fd=root_fd, follow_symlinks=False).st_mtime  # never pruned: since the lock was made
    return time.time() - last > policy.interval_s + PRUNE_LOCK_PATIENCE_S


def prune_if_due(root: str, policy_text: str, trust: Trust | None = None) -> PruneResult | None:
    """Prune ROOT when the policy's interval has passed since the last prune and no other process is pruning (a
    prune lock held for over PRUNE_LOCK_PATIENCE_S past the interval is ignored); None when not due. Errors (a
    read-only cache, a planted link at the stamp or lock) are ignored: pruning is housekeeping."""
    import fcntl

    try:
        policy = parse_policy(policy_text)
        root_fd = open_dir(root)
    except (OSError, ValueError):
        return None
    try:
        try:
            if policy.interval_s and time.time() - os.stat(STAMP, dir_fd=root_fd, follow_symlinks=False).st_mtime \
                    < policy.interval_s:
                return None
        except FileNotFoundError:
            pass
        lock = open_nofollow(LOCK, os.O_RDONLY | os.O_CREAT, dir_fd=root_fd)
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not _held_too_long(root_fd, policy):
                    return None  # another prune runs: pruning twice at once only costs the work twice
            os.close(open_nofollow(STAMP, os.O_RDONLY | os.O_CREAT, dir_fd=root_fd))
            os.utime(STAMP, dir_fd=root_fd, follow_symlinks=False)
            return prune(root, policy, trust=trust)
        finally:
            os.close(lock)
    except (OSError, ValueError):
        return None
    finally:
        os.close(root_fd)
