"""Pruning the backend cache to its policy (thinlto_cache.policy): expired entries first, then the least recently used
until the byte and file limits hold. An entry goes with its blobs; stale temporary files of writers that died
mid-store go too.

The backend step calls prune_if_due after a miss (never on a hit), at most once per prune_interval across
every process sharing the cache (a timestamp file and a non-blocking lock); `gn-thinlto cache trim` calls
prune directly. Standard library only.
"""

from __future__ import annotations

import os
import time

from thinlto_cache.fsutil import remove_if_exists
from thinlto_cache.policy import CachePolicy, parse_policy
from thinlto_cache.store import AC_DIR, CAS_DIR, CacheStore

STAMP = ".last-prune"
LOCK = ".prune.lock"
STALE_TMP_S = 3600  # a temporary file this old belongs to a writer that is gone


class PruneResult:
    __slots__ = ("blobs_removed", "bytes_kept", "bytes_removed", "entries_kept", "entries_removed")

    def __init__(self) -> None:
        self.entries_removed = self.blobs_removed = self.bytes_removed = self.entries_kept = self.bytes_kept = 0


def _scan(top: str) -> list[tuple[float, int, str]]:
    """(mtime, size, path) of every file under TOP/XX/; temporary files older than STALE_TMP_S are removed."""
    # (the content store's stale temporaries are swept by `gn-thinlto cache verify`)
    found = []
    now = time.time()
    try:
        fans = list(os.scandir(top))
    except FileNotFoundError:
        return []
    for fan in fans:
        if not fan.is_dir(follow_symlinks=False):
            continue
        for f in os.scandir(fan.path):
            try:
                st = f.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if f.name.startswith("."):
                if now - st.st_mtime > STALE_TMP_S:
                    remove_if_exists(f.path)
                continue
            found.append((st.st_mtime, st.st_size, f.path))
    return found


def _blob_sizes(top: str) -> dict[str, int]:
    """Every blob's name (DIGEST-SIZE) and size, from the directory listing alone (no stat per blob).
    Blobs no entry names (a writer killed between the two) are not found here: `gn-thinlto cache verify`
    removes them."""
    sizes = {}
    try:
        fans = [f.path for f in os.scandir(top) if f.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return {}
    for fan in fans:
        for name in os.listdir(fan):
            size = name.rpartition("-")[2]
            if not name.startswith(".") and size.isdigit():
                sizes[name] = int(size)
    return sizes


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


def prune(root: str, policy: CachePolicy, now: float | None = None) -> PruneResult:
    """Bring ROOT within POLICY now."""
    now = time.time() if now is None else now
    store = CacheStore(root)
    result = PruneResult()
    entries = sorted(_scan(os.path.join(root, AC_DIR)))  # oldest use first
    blobs = _blob_sizes(os.path.join(root, CAS_DIR))
    used_bytes = sum(blobs.values()) + sum(s for _, s, _ in entries)
    files = len(blobs) + len(entries)
    limit = _size_limit(root, policy, used_bytes)
    for mtime, size, path in entries:
        expired = policy.expiration_s and now - mtime > policy.expiration_s
        too_big = limit and used_bytes > limit
        too_many = policy.max_files and files > policy.max_files
        if not (expired or too_big or too_many):
            break  # entries are in LRU order: every later one is newer and the limits hold
        named = []
        try:  # raw reads: this loop may read tens of thousands of entries
            fd = os.open(path, os.O_RDONLY)
            try:
                text = os.read(fd, 4096).decode(errors="replace")
            finally:
                os.close(fd)
            named = [line.split(" ")[1:] for line in text.split("\n")[1:] if line.count(" ") == 2]
        except OSError:
            pass
        remove_if_exists(path)
        used_bytes, files = used_bytes - size, files - 1
        result.entries_removed += 1
        for digest, blob_size in named:
            blob = f"{digest}-{blob_size}"
            if blob in blobs:
                remove_if_exists(store.blob_path(digest, int(blob_size)))
                used_bytes, files = used_bytes - blobs[blob], files - 1
                result.blobs_removed += 1
                result.bytes_removed += blobs.pop(blob)
    result.entries_kept = len(entries) - result.entries_removed
    result.bytes_kept = used_bytes
    return result


def prune_if_due(root: str, policy_text: str) -> PruneResult | None:
    """Prune ROOT when the policy's interval has passed since the last prune and no other process is pruning;
    None when not due. Errors (a read-only cache) are ignored: pruning is housekeeping."""
    import fcntl

    try:
        policy = parse_policy(policy_text)
        stamp = os.path.join(root, STAMP)
        try:
            if policy.interval_s and time.time() - os.stat(stamp).st_mtime < policy.interval_s:
                return None
        except FileNotFoundError:
            pass
        with open(os.path.join(root, LOCK), "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            with open(stamp, "a"):
                pass
            os.utime(stamp)
            return prune(root, policy)
    except (OSError, ValueError):
        return None
