"""The backend cache on disk: verified hits, atomic writes, shared by build directories, bounded by a policy.

Laid out as a REAPI cache is split: `ac/KK/KEY` (the action cache) is a small entry naming, for each output
of a job (its object, and its .dwo under split DWARF), the SHA-256 and size of the content, which lives in
`cas/DD/DIGEST-SIZE` (the content store). Both are written under a temporary name and renamed into place, blobs
before the entry, so a reader in another ninja process (another build directory, another user) sees a whole
file or none, without a lock. A hit re-hashes every byte it serves: content that does not match its entry
is a miss (the entry is removed and one warning names it). A hit refreshes the use time (mtime) of the
entry; pruning (thinlto_base.prune) removes the least recently used entries, with their blobs, first.

Standard library only (the backend step imports it once per backend edge).
"""

from __future__ import annotations

import hashlib
import os
import stat
import time

from thinlto_base.fsutil import write_if_changed
from thinlto_base.notices import once_per_build, say
from thinlto_base.safefs import Refused, open_dir, open_dirs, read_regular, unlink_quiet, write_new
from thinlto_base.trust import Trust, Untrusted

AC_DIR, CAS_DIR, LOCK_DIR = "ac", "cas", "locks"
# thinlto_base.remote_stub.MAGIC, spelled here: every cache hit imports this module, not that one
STUB_MAGIC = b"!<gn-thinlto remote output>\n"
ENTRY_VERSION = "gn-thinlto-cache-entry-v2"  # v2: the entry names its key (v1 entries are plain misses)
ENTRY_CAP = 4096  # an entry names two outputs: anything larger is not an entry
# How long a miss waits for another process compiling the same backend (the longest backend measured took 53 s)
MISS_LOCK_PATIENCE_S = 180.0
ENTRY_MODE = 0o644  # whatever the umask: an entry no one but its writer can change (the trust check needs it)


class Corrupt(Exception):
    """A cache entry or blob whose content does not match what the entry records."""


class Dangling(Exception):
    """An entry whose blob is gone (pruned with another entry that shared it), or an entry of an older format:
    a plain miss."""


# Fault injection for the kill-mid-store test: the step kills itself (SIGKILL) once a temporary file is written.
FAULT_ENV = "GN_THINLTO_FAULT"
KILL_MID_STORE = "kill-mid-store"
# (NAME, DEFAULT, MEANING) for docs/reference/environment.md.
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    (FAULT_ENV, "", f"tests only: `{KILL_MID_STORE}` makes a backend step kill itself while it stores into the cache "
                    "(the step server and launcher then stand aside)"),
)


def shown(path: str) -> str:
    """PATH for a one-line message: a very long one (a mistaken setting) cut in the middle."""
    return path if len(path) <= 200 else f"{path[:100]}…({len(path)} characters)…{path[-100:]}"


def tmp_name(name: str) -> str:
    """A writer's unique temporary name for NAME: dot-prefixed (scans skip it; prune sweeps old ones)."""
    return f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp"


def _write_atomic(dir_fd: int, name: str, data: bytes, mode: int | None = None) -> None:
    """NAME in DIR_FD holds DATA or what it held before, never a part: a new temporary file, then rename.
    Not fsynced: every hit re-hashes what it reads, so what a power cut leaves torn is a miss (README)."""
    tmp = tmp_name(name)
    try:
        killed = os.environ.get(FAULT_ENV) == KILL_MID_STORE
        write_new(tmp, data[: len(data) // 2] if killed else data, dir_fd, mode)
        if killed:
            import signal

            os.kill(os.getpid(), signal.SIGKILL)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        unlink_quiet(tmp, dir_fd)
        raise


class _MissLock:
    __slots__ = ("fd", "name", "store")
    gave_up = False  # a lock was held past MISS_LOCK_PATIENCE_S: this process no longer waits for any

    def __init__(self, store: CacheStore, name: str) -> None:
        self.store, self.name, self.fd = store, name, -1

    def __enter__(self) -> bool:
        if not self.name:
            return False
        import fcntl

        try:
            locks = open_dirs(self.store.root_fd(create=True), (LOCK_DIR,), create=True)
            try:  # read-only is enough for flock: a lock file another user created still locks
                self.fd = os.open(self.name, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                                  0o666, dir_fd=locks)
            finally:
                os.close(locks)
            if not stat.S_ISREG(os.fstat(self.fd).st_mode):
                raise Refused(0, "not a regular file", self.name)
        except OSError:
            self.__exit__()
            return False  # a read-only or full cache, or a planted link or FIFO: compile without waiting
        # Waited for as long as a backend may compile, no longer: anyone who can read the cache can open a lock
        # file and hold it (flock needs no more), and would otherwise stop every miss of ours for good.
        deadline, pause = time.monotonic() + MISS_LOCK_PATIENCE_S, 0.005
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True  # look again: another holder may have stored between our miss and taking the lock
            except BlockingIOError:
                if time.monotonic() >= deadline or _MissLock.gave_up:
                    _MissLock.gave_up = True  # one wait in vain: the others of this process do not wait at all
                    self.__exit__()
                    return False  # compile without it: the same work twice at worst, never a wrong entry
                time.sleep(pause)
                pause = min(pause * 2, 0.1)
            except OSError:
                self.__exit__()
                return False

    def __exit__(self, *exc: object) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # releases the lock
            self.fd = -1


class CacheStore:
    """The cache directory ROOT; an empty ROOT is no cache (config `backend_cache: false`). Entries count only
    when TRUST (by default: this user and root) accepts their writer; WARN_DIR holds the markers that keep a
    warning to once per build ("" : once per process)."""

    __slots__ = ("_root_fd", "_said", "root", "trust", "warn_dir")

    def __init__(self, root: str | os.PathLike[str], trust: Trust | None = None, warn_dir: str = "") -> None:
        self.root = os.fspath(root)
        self.trust = trust if trust is not None else Trust()
        self.warn_dir = warn_dir
        self._root_fd = -1
        self._said: set[str] = set()

    def root_fd(self, create: bool = False) -> int:
        """The cache root, opened once (it is the configured path, links and all); below it nothing is followed."""
        if self._root_fd < 0:
            self._root_fd = open_dir(self.root, create=create)
        return self._root_fd

    def close(self) -> None:
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    def __del__(self) -> None:
        self.close()

    def entry_path(self, key: str) -> str:
        return os.path.join(self.root, AC_DIR, key[:2], key)

    def blob_path(self, digest: str, size: int) -> str:
        """DIGEST-SIZE: the size in the name lets pruning total the bytes from a directory listing alone."""
        return os.path.join(self.root, CAS_DIR, digest[:2], f"{digest}-{size}")

    def _dir(self, top: str, fan: str, create: bool = False) -> int:
        return open_dirs(self.root_fd(create), (top, fan), create)

    def read_entry(self, key: str) -> dict[str, tuple[str, int]] | None:
        """The entry of KEY: output kind ("o", "dwo") -> (sha256, size); None when there is none.
        Raises Untrusted when its writer is not trusted, Corrupt when it is malformed or names another key,
        Dangling for an entry of an older format."""
        try:
            fd = self._dir(AC_DIR, key[:2])
        except FileNotFoundError:
            return None
        try:
            data, st = read_regular(key, fd, ENTRY_CAP)
        except FileNotFoundError:
            return None
        finally:
            os.close(fd)
        self.trust.check(st)
        return parse_entry(data, key)

    def read_verified(self, key: str, kinds: tuple[str, ...]) -> dict[str, bytes] | None:
        """The content of KEY's outputs of KINDS, every byte checked against the entry; None on a miss.
        Raises Corrupt (after removing the entry) when anything does not match; Untrusted (the entry kept:
        it may be another user's own) when its writer is not trusted."""
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
                    fd = self._dir(CAS_DIR, digest[:2])
                    try:
                        data = read_regular(f"{digest}-{size}", fd, size)[0]
                    finally:
                        os.close(fd)
                except FileNotFoundError:
                    raise Dangling(kind) from None
                except Refused as e:
                    raise Corrupt(f"its {kind} blob {digest[:12]}… is {e.strerror}") from None
                if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
                    raise Corrupt(f"its {kind} blob {digest[:12]}… does not match its digest and size")
                out[kind] = data
        except (Corrupt, Dangling):
            self.remove_entry(key)
            raise
        try:  # the entry's mtime is its last use: pruning removes the least recently used first
            fd = self._dir(AC_DIR, key[:2])
            try:
                os.utime(key, dir_fd=fd, follow_symlinks=False)
            finally:
                os.close(fd)
        except OSError:
            pass  # a read-only cache, or another trusted writer's entry, still serves
        return out

    def remove_entry(self, key: str) -> None:
        try:
            fd = self._dir(AC_DIR, key[:2])
            try:
                unlink_quiet(key, fd)
            finally:
                os.close(fd)
        except OSError:
            pass  # not ours to remove (another writer's directory), or already gone

    def miss_lock(self, key: str) -> _MissLock:
        """A context that holds KEY's lock while a miss compiles, so that a concurrent job with the same key in
        another process waits and is then served by the cache. It yields whether the cache is worth a second
        look (a lock was taken: another holder may have stored between the miss and the lock). Locks are
        striped (LOCK_DIR/KEY[:3]); without a writable cache it does not lock. Hits never take it."""
        return _MissLock(self, key[:3] if self.root else "")

    def store(self, key: str, outputs: dict[str, bytes]) -> None:
        """Store OUTPUTS (kind -> content) under KEY: blobs first, then the entry. Raises OSError (ENOSPC,
        EROFS, EACCES, a planted link…) for the caller to report; what it wrote so far is complete files only."""
        if not self.root:
            return
        lines = [f"{ENTRY_VERSION} {key}"]
        for kind, data in outputs.items():
            digest = hashlib.sha256(data).hexdigest()
            fd = self._dir(CAS_DIR, digest[:2], create=True)
            try:  # written even when present: a damaged copy must go
                _write_atomic(fd, f"{digest}-{len(data)}", data)
            finally:
                os.close(fd)
            lines.append(f"{kind} {digest} {len(data)}")
        fd = self._dir(AC_DIR, key[:2], create=True)
        try:
            _write_atomic(fd, key, ("\n".join(lines) + "\n").encode(), ENTRY_MODE)
        finally:
            os.close(fd)


def parse_entry(data: bytes, key: str) -> dict[str, tuple[str, int]]:
    """An entry's outputs; Corrupt unless it is well formed and names KEY (an entry renamed or linked under
    another key is refused), Dangling for an older format."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise Corrupt("entry is not text") from None
    lines = text.split("\n")
    head = lines[0].split(" ")
    if head[0] != ENTRY_VERSION:
        if head[0].startswith("gn-thinlto-cache-entry-"):
            raise Dangling("an older entry format")
        raise Corrupt("entry is truncated or not an entry")
    if len(head) != 2 or head[1] != key or lines[-1] != "":
        raise Corrupt("entry is truncated or names another key")
    outputs: dict[str, tuple[str, int]] = {}
    for line in lines[1:-1]:
        parts = line.split(" ")
        if len(parts) != 3 or len(parts[1]) != 64 or not parts[2].isdigit():
            raise Corrupt(f"entry line {line!r} is malformed")
        outputs[parts[0]] = (parts[1], int(parts[2]))
    return outputs


def fetch_outputs(store: CacheStore, key: str, dests: dict[str, str]) -> bool:
    """Copy KEY's verified outputs to DESTS (kind -> path; mtimes kept when equal). False on a miss; a
    corrupt entry is a miss, removed, with one warning naming it; an entry from a writer this build does not
    trust is a miss, kept, with one warning per cache per build."""
    try:
        data = store.read_verified(key, tuple(dests))
    except Dangling:
        return False
    except Corrupt as e:
        say(f"entry {key[:12]}… for {dests['o']}: {e}; removed, compiling again")
        return False
    except Untrusted as e:
        once_per_build(store.warn_dir, "untrusted", f"{store.root} {e.uid}",
                       f"{shown(store.root)}: entries of uid {e.uid} are not used ({e.why}; trusted writers: uids "
                       f"{', '.join(map(str, sorted(store.trust.uids)))}, more with cache_trusted_writers); "
                       "compiling instead", store._said)
        return False
    except OSError as e:
        say(f"cannot read entry {key[:12]}… ({e.strerror or e}); compiling")
        return False
    if data is None:
        return False
    if not data.get("o", b"?"):  # no object is empty: an entry stored before the steps refused them is a miss
        return False
    for kind, path in dests.items():
        write_if_changed(path, data[kind])
    return True


def store_outputs(store: CacheStore, key: str, outputs: dict[str, bytes]) -> None:
    """Store OUTPUTS under KEY; when the cache cannot take them (full disk, read-only directory, a planted
    link), skip it and warn once per build (a marker in the store's warn_dir; without one, once per process).
    Every later miss tries again: a cache that can take an entry again gets it. The build goes on. A stand-in for
    an object kept in the remote CAS (thinlto_base.remote_stub) is never stored: whoever hits the entry wants the
    object."""
    if any(data.startswith(STUB_MAGIC) for data in outputs.values()):
        return
    try:
        store.store(key, outputs)
    except OSError as e:
        # once per build, not "until a store succeeds": on a nearly full disk small entries still fit between
        # larger ones that do not, and concurrent steps must not both decide they are the first to say it
        once_per_build(store.warn_dir, "unwritable", shown(store.root),
                       f"cannot store in {shown(store.root)} ({e.strerror or e}); building without caching until "
                       "it can", store._said)
