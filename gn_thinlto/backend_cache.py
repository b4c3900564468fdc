"""Content-addressed local cache for ThinLTO backend outputs, with a hit/miss log in the build dir.

The key covers everything the native object depends on: the compiler's identity, the backend flags, the
bitcode's content and the index's content (which names every module the backend imports from together with
its module hash, so an imported module's change changes the key).
"""

from __future__ import annotations

import enum
import hashlib
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gn_thinlto.fsutil import write_if_changed

KEY_VERSION = b"gn-thinlto-backend-v1"


class CacheEvent(enum.Enum):
    HIT = "hit"
    MISS = "miss"


@dataclass(frozen=True)
class BackendJob:
    """One backend command split into its parts: the paths it reads/writes and everything else."""

    argv: tuple[str, ...]
    bitcode: str
    index: str
    output: str

    @classmethod
    def parse(cls, argv: Sequence[str]) -> BackendJob:
        args = list(argv)
        try:
            output = args[args.index("-o") + 1]
            bitcode = args[args.index("ir") + 1]
        except (ValueError, IndexError):
            raise ValueError(f"not a backend command (need '-x ir BITCODE' and '-o OUT'): {' '.join(args)}") from None
        index = next((a.split("=", 1)[1] for a in args if a.startswith("-fthinlto-index=")), "")
        return cls(tuple(args), bitcode, index, output)

    def relocated(self, index: str, output: str) -> tuple[str, ...]:
        """The same command reading its index from INDEX and writing OUTPUT (the bitcode path is kept)."""
        names = {self.output: output}
        if self.index:
            names[f"-fthinlto-index={self.index}"] = f"-fthinlto-index={index}"
        return tuple(names.get(a, a) for a in self.argv)

    def flags_for_key(self) -> list[str]:
        """The command with its three paths replaced by placeholders (paths do not affect the output)."""
        names = {self.output: "<out>", self.bitcode: "<bitcode>", f"-fthinlto-index={self.index}": "<index>"}
        return [names.get(a, a) for a in self.argv[1:]]


def compiler_identity(compiler: str) -> str:
    path = shutil.which(compiler) or compiler
    real = os.path.realpath(path)
    st = os.stat(real)
    return f"{real}\0{st.st_size}\0{st.st_mtime_ns}"


def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else "-"


def _digest(parts: Sequence[str]) -> str:
    h = hashlib.sha256(KEY_VERSION)
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def content_key(job: BackendJob) -> str:
    """What the job computes, the same on every machine: flags without paths, bitcode and index contents."""
    return _digest([*job.flags_for_key(), _file_digest(job.bitcode), _file_digest(job.index)])


def cache_key(job: BackendJob, content: str | None = None) -> str:
    """The local cache key: the content key (CONTENT, when already computed) and this machine's compiler binary."""
    return _digest([compiler_identity(job.argv[0]), content if content is not None else content_key(job)])


@dataclass(frozen=True)
class BackendCache:
    root: Path

    def path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.o"

    def fetch(self, key: str, dest: Path) -> bool:
        """Copy the cached object to DEST (keeping DEST's mtime if equal); False when not cached."""
        try:
            data = self.path(key).read_bytes()
        except FileNotFoundError:
            return False
        write_if_changed(dest, data)
        return True

    def store(self, key: str, data: bytes) -> None:
        write_if_changed(self.path(key), data)


def record(log: Path, event: CacheEvent, key: str, output: str) -> None:
    """Append one line; O_APPEND writes of one short line are atomic enough for concurrent backends."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(f"{event.value} {key} {output}\n")


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int


def read_stats(log: Path, offset: int = 0) -> CacheStats:
    """Hit/miss counts from the log, starting at byte OFFSET (to count one build)."""
    try:
        with log.open("rb") as f:
            f.seek(offset)
            lines = f.read().decode().splitlines()
    except FileNotFoundError:
        return CacheStats(0, 0)
    hits = sum(1 for line in lines if line.startswith(CacheEvent.HIT.value + " "))
    misses = sum(1 for line in lines if line.startswith(CacheEvent.MISS.value + " "))
    return CacheStats(hits, misses)
