"""The backend cache on disk: verified hits, atomic writes, shared by build directories, bounded by a policy.

Laid out as a REAPI cache is split: `ac/KK/KEY` (the action cache) is a small entry naming, for each output
of a job (its object, and its .dwo under split DWARF), the SHA-256 and size of the content, which lives in
`cas/DD/DIGEST-SIZE` (the content store). Both are written under a temporary name and renamed into place, blobs
before the entry, so a reader in another ninja process (another build directory, another user) sees a whole
file or none, without a lock. A hit re-hashes every byte it serves: content that does not match its entry
is a miss (the entry is removed and one warning names it). A hit refreshes the use time (mtime) of the
entry; pruning (thinlto_cache.prune) removes the least recently used entries, with their blobs, first.

Standard library only (the backend step imports it once per backend edge).
"""

from __future__ import annotations

import hashlib
import os
import sys

from thinlto_cache.fsutil import make_parent, read_bytes, remove_if_exists, write_if_changed

AC_DIR, CAS_DIR, LOCK_DIR = "ac", "cas", "locks"
ENTRY_VERSION = "gn-thinlto-cache-entry-v1"


def warn(message: str) -> None:
    print(f"gn-thinlto: warning: backend cache: {message}", file=sys.stderr)


class Corrupt(Exception):
    """A cache entry or blob whose content does not match what the entry records."""


class Dangling(Exception):
    """An entry whose blob is gone (pruned with another entry that shared it): a plain miss."""


# Fault injection for the kill-mid-store test: the step kills itself (SIGKILL) once a temporary file is written.
FAULT_ENV = "GN_THINLTO_FAULT"
KILL_MID_STORE = "kill-mid-store"


def _write_atomic(path: str, data: bytes) -> None:
    """PATH holds DATA or what it held before, never a part: a unique temporary name, then rename."""
    make_parent(path)
    parent, name = os.path.split(path)
    tmp = os.path.join(parent, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data[: len(data) // 2] if os.environ.get(FAULT_ENV) == KILL_MID_STORE else data)
        if os.environ.get(FAULT_ENV) == KILL_MID_STORE:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        os.replace(tmp, path)
    except BaseException:
        remove_if_exists(tmp)
        raise


class _MissLock:
    __slots__ = ("fd", "path")

    def __init__(self, path: str) -> None:
        self.path, self.fd = path, -1

    def __enter__(self) -> bool:
        if not self.path:
            return False
        import fcntl

        try:
            make_parent(self.path)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError:
            return False  # a read-only or full cache: compile without waiting for anyone
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return True  # look again: another holder may have stored between our miss and taking the lock

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the lock
            self.fd = -1


class CacheStore:
    """The cache directory ROOT; an empty ROOT is no cache (config `backend_cache: false`)."""

    __slots__ = ("root",)

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.fspath(root)

    def entry_path(self, key: str) -> str:
        return os.path.join(self.root, AC_DIR, key[:2], key)

    def blob_path(self, digest: str, size: int) -> str:
        """DIGEST-SIZE: the size in the name lets pruning total the bytes from a directory listing alone."""
        return os.path.join(self.root, CAS_DIR, digest[:2], f"{digest}-{size}")

    def read_entry(self, key: str) -> dict[str, tuple[str, int]] | None:
        """The entry of KEY: output kind ("o", "dwo") -> (sha256, size); None when there is none.
        Raises Corrupt when the entry itself is malformed."""
        try:
            text = read_bytes(self.entry_path(key)).decode()
        except FileNotFoundError:
            return None
        except UnicodeDecodeError:
            raise Corrupt("entry is not text") from None
        lines = text.split("\n")
        if lines[0] != ENTRY_VERSION or lines[-1] != "":
            raise Corrupt("entry is truncated or not an entry")
        outputs: dict[str, tuple[str, int]] = {}
        for line in lines[1:-1]:
            parts = line.split(" ")
            if len(parts) != 3 or len(parts[1]) != 64 or not parts[2].isdigit():
                raise Corrupt(f"entry line {line!r} is malformed")
            outputs[parts[0]] = (parts[1], int(parts[2]))
        return outputs

    def read_verified(self, key: str, kinds: tuple[str, ...]) -> dict[str, bytes] | None:
        """The content of KEY's outputs of KINDS, every byte checked against the entry; None on a miss.
        Raises Corrupt (after removing the entry) when anything does not match."""
        if not self.root:
            return None
        try:
            entry = self.read_entry(key)
            if entry is None:
                return None
            out = {}
            for kind in kinds:
                if kind not in entry:
                    raise Corrupt(f"entry has no {kind!r} output")
                digest, size = entry[kind]
                try:
                    data = read_bytes(self.blob_path(digest, size))
                except FileNotFoundError:
                    raise Dangling(kind) from None
                if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                    raise Corrupt(f"its {kind} blob {digest[:12]}… does not match its digest and size")
                out[kind] = data
        except (Corrupt, Dangling):
            remove_if_exists(self.entry_path(key))
            raise
        try:  # the entry's mtime is its last use: pruning removes the least recently used first
            os.utime(self.entry_path(key))
        except OSError:
            pass  # a read-only cache still serves
        return out

    def miss_lock(self, key: str) -> _MissLock:
        """A context that holds KEY's lock while a miss compiles, so that a concurrent job with the same key in
        another process waits and is then served by the cache. It yields whether the cache is worth a second
        look (a lock was taken: another holder may have stored between the miss and the lock). Locks are
        striped (LOCK_DIR/KEY[:3]); without a writable cache it does not lock. Hits never take it."""
        return _MissLock(os.path.join(self.root, LOCK_DIR, key[:3]) if self.root else "")

    def store(self, key: str, outputs: dict[str, bytes]) -> None:
        """Store OUTPUTS (kind -> content) under KEY: blobs first, then the entry. Raises OSError (ENOSPC,
        EROFS, EACCES…) for the caller to report; what it wrote so far is complete files only."""
        if not self.root:
            return
        lines = [ENTRY_VERSION]
        for kind, data in outputs.items():
            digest = hashlib.sha256(data).hexdigest()
            _write_atomic(self.blob_path(digest, len(data)), data)  # even when present: a damaged copy must go
            lines.append(f"{kind} {digest} {len(data)}")
        _write_atomic(self.entry_path(key), ("\n".join(lines) + "\n").encode())


def fetch_outputs(store: CacheStore, key: str, dests: dict[str, str]) -> bool:
    """Copy KEY's verified outputs to DESTS (kind -> path; mtimes kept when equal). False on a miss; a
    corrupt entry is a miss, removed, with one warning naming it."""
    try:
        data = store.read_verified(key, tuple(dests))
    except Dangling:
        return False
    except Corrupt as e:
        warn(f"entry {key[:12]}… for {dests['o']}: {e}; removed, compiling again")
        return False
    except OSError as e:
        warn(f"cannot read entry {key[:12]}… ({e.strerror or e}); compiling")
        return False
    if data is None:
        return False
    for kind, path in dests.items():
        write_if_changed(path, data[kind])
    return True


def store_outputs(store: CacheStore, key: str, outputs: dict[str, bytes], state_dir: str) -> None:
    """Store OUTPUTS under KEY; when the cache cannot take them (full disk, read-only directory), skip it and
    warn once per build directory (a marker in STATE_DIR) until a store succeeds again. The build goes on."""
    marker = os.path.join(state_dir, "backend-cache.unwritable")
    try:
        store.store(key, outputs)
    except OSError as e:
        if not os.path.exists(marker):
            warn(f"cannot store in {store.root} ({e.strerror or e}); building without caching until it can")
            try:
                write_if_changed(marker, f"{e}\n")
            except OSError:
                pass
        return
    remove_if_exists(marker)
