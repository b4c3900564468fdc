"""An action's input tree before anything is written: its Directory messages fetched and measured against the
worker's bounds (expanded nodes, file bytes, depth), and its symlinks resolved as the kernel will resolve them.

Why measure the expansion: a Directory may name one child digest many times, so a few KiB of Directory blobs can
describe millions of entries (4 children per level for 12 levels: 16 million directories). The unique digests are
fetched (bounded by the node bound too), then each digest's expanded size is summed bottom-up with saturation,
and the tree is refused before a single entry is created.
"""

from __future__ import annotations

import os
import posixpath
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError

from goma_ext.reapi.cas import Cas
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.proto import code_pb2, re_pb2
from goma_ext.worker.errors import Refusal, bad_path

MAX_LINK_HOPS = 40  # Linux's MAXSYMLINKS: past this many links in one resolution, open(2) fails with ELOOP


def too_large(message: str) -> Refusal:
    return Refusal(message, code_pb2.RESOURCE_EXHAUSTED)


# The messages a client's action is made of, read whole into memory: an Action, a Command or one Directory larger
# than this (a client names their sizes; padded with unknown fields, one could be gigabytes), or Directory messages
# larger than TREE_MESSAGE_BYTES in all, are refused before they are read.
MESSAGE_BYTES = 16 << 20
TREE_MESSAGE_BYTES = 256 << 20


def check_message_size(digest: Digest, what: str) -> Digest:
    if digest.size > MESSAGE_BYTES:
        raise too_large(f"{what} is {digest.size} bytes, more than the {MESSAGE_BYTES} a worker reads")
    return digest


@dataclass(frozen=True)
class TreeBounds:
    """What one input tree may hold: entries (files, directories and symlinks, counted as materialised), file
    bytes, and depth."""

    nodes: int
    file_bytes: int
    depth: int


@dataclass(frozen=True)
class Deadline:
    """When the action's time is up (monotonic); materialising counts against it."""

    at: float | None = None

    def check(self, doing: str) -> None:
        if self.at is not None and time.monotonic() >= self.at:
            raise RemoteError(f"the action's timeout passed while {doing}", temporary=True, code="DEADLINE_EXCEEDED")

    def remaining(self) -> float | None:
        return None if self.at is None else max(0.0, self.at - time.monotonic())


NO_DEADLINE = Deadline()
LINK_STEPS_PER_CHECK = 4096  # path components resolved between two looks at the deadline


def check_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise bad_path(f"input tree holds an invalid name {name!r}")
    return name


def check_digest(d: re_pb2.Digest, what: str) -> Digest:
    """D as a Digest, refused unless it is a lowercase hex SHA-256 and a size: the file cache names files after
    digests, so a client's "../" in one must never reach a path."""
    digest = Digest.from_proto(d)
    if not digest.well_formed:
        raise bad_path(f"{what} has a malformed digest {d.hash[:80]!r}/{d.size_bytes}")
    return digest


def _check_digests(msg: re_pb2.Directory) -> None:
    for f in msg.files:
        check_digest(f.digest, f"input {f.name!r}")
    for d in msg.directories:
        check_digest(d.digest, f"input directory {d.name!r}")


def _check_names(msg: re_pb2.Directory) -> None:
    """Every name valid and used once in the directory (REAPI: unique; a file and a link of one name would make the
    worker create one through the other)."""
    seen: set[str] = set()
    names = [f.name for f in msg.files] + [d.name for d in msg.directories] + [s.name for s in msg.symlinks]
    for name in names:
        if check_name(name) in seen:
            raise bad_path(f"input tree names {name!r} twice in one directory")
        seen.add(name)


def fetch(cas: Cas, root: Digest, bounds: TreeBounds, deadline: Deadline) -> dict[Digest, re_pb2.Directory]:
    """Every Directory message of the tree, level by level, refusing (RESOURCE_EXHAUSTED) a tree deeper, larger or
    with more entries than `bounds` once expanded."""
    dirs: dict[Digest, re_pb2.Directory] = {}
    level = {root}
    depth = 0  # of `level`'s directories below the root
    read_bytes = 0
    while level:
        if depth > bounds.depth:
            raise too_large(f"input tree is deeper than {bounds.depth} levels (the worker's --max-input-depth)")
        deadline.check("fetching the input tree")
        if len(dirs) + len(level) > bounds.nodes:
            raise too_large(f"input tree has more than {bounds.nodes} entries (the worker's --max-input-nodes)")
        for d in level:
            check_message_size(d, f"input tree Directory {d}")
        read_bytes += sum(d.size for d in level)
        if read_bytes > TREE_MESSAGE_BYTES:
            raise too_large(f"input tree's Directory messages are more than {TREE_MESSAGE_BYTES} bytes")
        nxt: set[Digest] = set()
        for d, data in cas.read_many(level).items():
            msg = re_pb2.Directory()
            try:
                msg.ParseFromString(data)
            except DecodeError as e:
                raise bad_path(f"input tree Directory {d} does not decode: {e}") from e
            _check_names(msg)
            _check_digests(msg)
            dirs[d] = msg
            nxt.update(Digest.from_proto(c.digest) for c in msg.directories)
        level = nxt - set(dirs)
        depth += 1
    measure(dirs, root, bounds)
    return dirs


def measure(dirs: dict[Digest, re_pb2.Directory], root: Digest, bounds: TreeBounds) -> tuple[int, int]:
    """(entries, file bytes) of the expanded tree; refused past the bounds. Each digest is summed once (memoised),
    children before parents, with sums saturating just past the bound."""
    cap_nodes, cap_bytes = bounds.nodes + 1, bounds.file_bytes + 1
    sizes: dict[Digest, tuple[int, int]] = {}
    order: list[Digest] = []
    seen: set[Digest] = set()
    stack: list[tuple[Digest, bool]] = [(root, False)]
    while stack:  # post-order without recursion (the depth is bounded, but Python's stack is small)
        d, children_done = stack.pop()
        if children_done:
            order.append(d)
            continue
        if d in seen:
            continue
        seen.add(d)
        stack.append((d, True))
        stack.extend((Digest.from_proto(c.digest), False) for c in dirs[d].directories)
    for d in order:
        msg = dirs[d]
        nodes = len(msg.files) + len(msg.symlinks) + len(msg.directories)
        size = sum(f.digest.size_bytes for f in msg.files)
        for c in msg.directories:
            n, b = sizes[Digest.from_proto(c.digest)]
            nodes, size = min(cap_nodes, nodes + n), min(cap_bytes, size + b)
        sizes[d] = (min(cap_nodes, nodes), min(cap_bytes, size))
    nodes, size = sizes[root]
    if nodes > bounds.nodes:
        raise too_large(f"input tree has more than {bounds.nodes} entries once expanded (the worker's "
                        "--max-input-nodes)")
    if size > bounds.file_bytes:
        raise too_large(f"input tree holds more than {bounds.file_bytes} bytes of files once expanded (the worker's "
                        "--max-input-bytes)")
    return nodes, size


Lookup = Callable[[str], "tuple[str, str] | None"]  # relative path -> ("dir"|"file"|"link", link target) or None


def disk_lookup(root: Path) -> Lookup:
    """What a path names in the tree under `root` (lstat: a link is reported, not followed)."""

    def look(rel: str) -> tuple[str, str] | None:
        full = os.path.join(root, rel)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return None
        if stat.S_ISLNK(st.st_mode):
            return "link", os.readlink(full)
        return ("dir" if stat.S_ISDIR(st.st_mode) else "file"), ""

    return look


def resolve_link(link: str, target: str, look: Lookup, deadline: Deadline = NO_DEADLINE) -> str:
    """Where the symlink at `link` (relative to the tree's top) leads, resolved as the kernel resolves a path: one
    component at a time, `..` taken physically (after a link, from the directory the link led to), links inside the
    target followed (at most MAX_LINK_HOPS). A missing component is taken as it is (the action may create it).
    Refused: an absolute target, and any resolution that leaves the tree. One link may take tens of thousands of
    steps (hops of 4 KB targets), so the action's DEADLINE is looked at as it goes."""
    where = f"input symlink {link} -> {target}"
    current = [n for n in posixpath.dirname(link).split("/") if n]  # the link's own directory: real directories
    pending = list(reversed(target.split("/")))
    if target.startswith("/"):
        raise bad_path(f"{where} is absolute (this worker refuses absolute symlinks)")
    hops = 1
    steps = 0
    while pending:
        steps += 1
        if steps % LINK_STEPS_PER_CHECK == 0:
            deadline.check("checking the input symlinks")
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if not current:
                raise bad_path(f"{where} leaves the input root as the kernel resolves it")
            current.pop()
            continue
        found = look("/".join([*current, name]))
        if found is not None and found[0] == "link":
            hops += 1
            if hops > MAX_LINK_HOPS:
                raise bad_path(f"{where} passes through more than {MAX_LINK_HOPS} symlinks (a loop?)")
            if found[1].startswith("/"):
                raise bad_path(f"{where} passes through an absolute symlink")
            pending.extend(reversed(found[1].split("/")))
            continue
        current.append(name)
    return "/".join(current)
