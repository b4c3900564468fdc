"""Input trees for the worker's tests from nested dicts: a dict is a directory, ("file", bytes, executable) a file,
("link", target) a symlink, ("digest", Digest) a directory already stored, ("named", hash, size) a file whose
digest is given as it is (no blob: an attacker's digest). Each blob goes through `put`."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.proto import re_pb2

Put = Callable[[Digest, bytes], None]


def build(tree: Mapping[str, object], put: Put) -> Digest:
    """The Directory digest of TREE, every blob (files and Directory messages) given to PUT."""
    msg = re_pb2.Directory()
    for name in sorted(tree):
        node = tree[name]
        if isinstance(node, Mapping):
            msg.directories.add(name=name, digest=build(node, put).to_proto())
        elif node[0] == "digest":  # type: ignore[index]
            msg.directories.add(name=name, digest=node[1].to_proto())  # type: ignore[index]
        elif node[0] == "named":  # type: ignore[index]
            msg.files.add(name=name, digest=re_pb2.Digest(hash=node[1], size_bytes=node[2]))  # type: ignore[index]
        elif node[0] == "file":  # type: ignore[index]
            data: bytes = node[1]  # type: ignore[index]
            put(Digest.of_bytes(data), data)
            msg.files.add(name=name, digest=Digest.of_bytes(data).to_proto(), is_executable=node[2])  # type: ignore[index]
        else:
            msg.symlinks.add(name=name, target=node[1])  # type: ignore[index]
    return stored(msg, put)


def stored(msg: re_pb2.Directory, put: Put) -> Digest:
    data = serialize(msg)
    put(Digest.of_bytes(data), data)
    return Digest.of_bytes(data)
