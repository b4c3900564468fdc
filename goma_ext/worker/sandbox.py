"""Materialise an input root in a fresh directory and collect outputs, refusing any path that escapes it."""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Sequence
from pathlib import Path

from goma_ext.remote.cas import Cas
from goma_ext.remote.digest import Digest
from goma_ext.remote.merkle import BlobSource
from goma_ext.remote.proto import re_pb2
from goma_ext.worker.errors import bad_path

MAX_DEPTH = 64


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


def materialise(cas: Cas, root: Digest, sandbox: Path) -> int:
    """Write the tree rooted at `root` under the (empty) sandbox; return the number of files."""
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
    blobs = cas.read_many({d for _, d, _ in files})
    for path, d, executable in files:
        if path.is_symlink() or path.exists():
            raise bad_path(f"input {path.relative_to(sandbox)} is listed twice")
        path.write_bytes(blobs[d])
        if executable:
            path.chmod(0o755)
    return len(files)


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
