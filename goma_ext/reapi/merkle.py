"""Canonical REAPI input roots: a Merkle tree of `Directory` messages built from exec-root-relative files."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.errors import InputError
from goma_ext.reapi.proto import re_pb2


@dataclass(frozen=True)
class BlobSource:
    """Where a blob's bytes come from: a file on disk or bytes in memory."""

    path: Path | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        if self.path is None:
            raise InputError("blob source has neither data nor path")
        return self.path.read_bytes()


@dataclass(frozen=True)
class InputTree:
    """A root directory digest plus every blob (files and Directory messages) reachable from it."""

    root: Digest
    blobs: Mapping[Digest, BlobSource]
    file_bytes: int


@dataclass
class _Dir:
    files: dict[str, tuple[Digest, bool]] = field(default_factory=dict)
    dirs: dict[str, _Dir] = field(default_factory=dict)
    sealed: dict[str, Digest] = field(default_factory=dict)  # subtrees whose Directory blobs exist already


def normalize(rel: str) -> str:
    """A clean exec-root-relative POSIX path; refuses absolute paths and paths that leave the root."""
    if not rel or posixpath.isabs(rel):
        raise InputError(f"input path {rel!r} is not relative to the exec root")
    norm = posixpath.normpath(rel)
    if norm == ".." or norm.startswith("../") or norm == ".":
        raise InputError(f"input path {rel!r} leaves the exec root")
    return norm


def _insert(root: _Dir, rel: str, digest: Digest, executable: bool) -> None:
    *parents, name = rel.split("/")
    node = root
    for part in parents:
        if part in node.files:
            raise InputError(f"{rel}: {part} is both a file and a directory")
        if part in node.sealed:
            raise InputError(f"{rel}: an input path lies inside a directory the action receives whole")
        node = node.dirs.setdefault(part, _Dir())
    if name in node.dirs or name in node.sealed:
        raise InputError(f"{rel}: is both a file and a directory")
    node.files[name] = (digest, executable)


def _graft(root: _Dir, rel: str, digest: Digest) -> None:
    *parents, name = normalize(rel).split("/")
    node = root
    for part in parents:
        node = node.dirs.setdefault(part, _Dir())
    if name in node.files or name in node.dirs or name in node.sealed:
        raise InputError(f"{rel}: an input path lies inside a directory the action receives whole")
    node.sealed[name] = digest


def _graft_all(root: _Dir, subtrees: Mapping[str, InputTree] | None) -> dict[Digest, BlobSource]:
    """Graft SUBTREES (trees built already) whole at their exec-root-relative paths; their blobs."""
    blobs: dict[Digest, BlobSource] = {}
    for rel, sub in (subtrees or {}).items():
        _graft(root, rel, sub.root)
        blobs.update(sub.blobs)
    return blobs


def _emit(node: _Dir, blobs: dict[Digest, BlobSource]) -> Digest:
    msg = re_pb2.Directory()
    for name in sorted(node.files):
        digest, executable = node.files[name]
        msg.files.add(name=name, digest=digest.to_proto(), is_executable=executable)
    children = {name: _emit(sub, blobs) for name, sub in node.dirs.items()} | node.sealed
    for name in sorted(children):
        msg.directories.add(name=name, digest=children[name].to_proto())
    data = serialize(msg)
    digest = Digest.of_bytes(data)
    blobs[digest] = BlobSource(data=data)
    return digest


FileDigester = Callable[[Path, os.stat_result], Digest]


def hash_file(path: Path, st: os.stat_result) -> Digest:
    """The default FileDigester: read and hash the file (the stat result is for digesters that memoize)."""
    return Digest.of_file(path)


def tree_of_files(files: Mapping[str, tuple[Digest, bool]], subtrees: Mapping[str, InputTree] | None = None
                  ) -> InputTree:
    """The canonical tree of files already hashed (relative path -> digest, executable); its blobs are the
    Directory messages only, and those of SUBTREES (grafted whole, as in build_input_tree)."""
    root = _Dir()
    blobs = _graft_all(root, subtrees)
    for rel in sorted(files):
        _insert(root, normalize(rel), *files[rel])
    return InputTree(_emit(root, blobs), blobs, sum(d.size for d, _ in files.values()))


def build_input_tree(
    exec_root: Path, paths: Iterable[str], extra_dirs: Iterable[str] = (), digest_of: FileDigester = hash_file,
    subtrees: Mapping[str, InputTree] | None = None,
) -> InputTree:
    """Hash each file (exec-root-relative path) and build the canonical tree; `extra_dirs` are kept even if empty.

    `digest_of` hashes one file; the proxy passes one that remembers digests by the file's stat identity.
    `subtrees` are trees built already (the toolchain), grafted whole at their exec-root-relative paths: their
    blobs join the result, their bytes do not count in `file_bytes` (the inputs of the command itself)."""
    root = _Dir()
    blobs = _graft_all(root, subtrees)
    file_bytes = 0
    for rel in sorted({normalize(p) for p in paths}):
        full = exec_root / rel
        try:
            st = os.stat(full)
        except OSError as e:
            raise InputError(f"input {rel}: {e.strerror}") from e
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"input {rel} is not a regular file")
        digest = digest_of(full, st)
        blobs.setdefault(digest, BlobSource(path=full))
        file_bytes += digest.size
        _insert(root, rel, digest, bool(st.st_mode & stat.S_IXUSR))
    for rel in extra_dirs:
        norm = posixpath.normpath(rel)
        if norm != ".":
            node = root
            for part in normalize(norm).split("/"):
                node = node.dirs.setdefault(part, _Dir())
    return InputTree(_emit(root, blobs), blobs, file_bytes)
