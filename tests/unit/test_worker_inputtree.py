"""The worker's view of an input tree before it writes anything (bounds, links resolved as the kernel does) and its
descriptor-relative, no-follow file operations (goma_ext/worker/inputtree.py, beneath.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.proto import code_pb2, re_pb2
from goma_ext.worker import beneath
from goma_ext.worker.errors import Refusal
from goma_ext.worker.inputtree import TreeBounds, disk_lookup, measure, resolve_link

BIG = TreeBounds(nodes=10**9, file_bytes=10**15, depth=64)


def _tree(tmp_path: Path, links: dict[str, str], dirs: tuple[str, ...] = ()) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    for d in dirs:
        (root / d).mkdir(parents=True)
    for name, target in links.items():
        os.symlink(target, root / name)
    return root


@pytest.mark.parametrize("links, link", [
    ({"d": ".", "u": "d/.."}, "u"),  # text stays inside ("d/.." is "."), the kernel goes to root/..
    ({"d": ".", "u0": "d/..", "u1": "u0/.."}, "u1"),
    ({"a/l": "..", "a/m": "l/.."}, "a/m"),  # a/l is the root; the root's .. is outside
    ({"x": "y/../../..", "y": "a/b"}, "x"),  # y leads two levels down: y/../.. is the root, one .. past it
    ({"p": "/etc"}, "p"),
    ({"q": "r", "r": "/"}, "q"),  # absolute only at the second hop
])
def test_links_that_the_kernel_resolves_outside_are_refused(tmp_path: Path, links: dict[str, str],
                                                            link: str) -> None:
    root = _tree(tmp_path, links, dirs=("a/b",))
    with pytest.raises(Refusal) as e:
        for name, target in links.items():
            resolve_link(name, target, disk_lookup(root))
    assert e.value.code == code_pb2.INVALID_ARGUMENT


def test_links_that_stay_inside_resolve_where_the_kernel_goes(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"a/b/up": "../..", "a/in": "b/up/a", "loop": "loop2", "loop2": "missing/x"},
                 dirs=("a/b",))
    look = disk_lookup(root)
    assert resolve_link("a/b/up", "../..", look) == ""
    assert resolve_link("a/in", "b/up/a", look) == "a"
    assert resolve_link("loop", "loop2", look) == "missing/x"  # dangling: the action may create it


def test_a_link_loop_is_refused(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"a": "b", "b": "a"})
    with pytest.raises(Refusal, match="more than 40 symlinks"):
        resolve_link("a", "b", disk_lookup(root))


def _bomb(width: int, depth: int) -> tuple[dict[Digest, re_pb2.Directory], Digest]:
    """A chain of Directory messages, each naming the one below `width` times: width**depth directories."""
    leaf = re_pb2.Directory(files=[re_pb2.FileNode(name="f", digest=Digest.of_bytes(b"x" * 1000).to_proto())])
    dirs = {Digest.of_bytes(serialize(leaf)): leaf}
    below = Digest.of_bytes(serialize(leaf))
    for _ in range(depth):
        msg = re_pb2.Directory(directories=[re_pb2.DirectoryNode(name=f"c{i}", digest=below.to_proto())
                                            for i in range(width)])
        below = Digest.of_bytes(serialize(msg))
        dirs[below] = msg
    return dirs, below


def test_a_tree_bomb_is_measured_expanded_and_refused_before_anything_is_made() -> None:
    dirs, root = _bomb(4, 12)  # 13 small messages describing 16.7 million directories
    assert len(dirs) == 13
    with pytest.raises(Refusal) as e:
        measure(dirs, root, TreeBounds(nodes=100_000, file_bytes=10**15, depth=64))
    assert e.value.code == code_pb2.RESOURCE_EXHAUSTED and "100000 entries" in str(e.value)
    with pytest.raises(Refusal, match="bytes of files"):
        measure(dirs, root, TreeBounds(nodes=10**9, file_bytes=1 << 20, depth=64))
    nodes, size = measure(*_bomb(2, 3), BIG)
    assert (nodes, size) == (2 + 4 + 8 + 8, 8 * 1000)  # directories of each level and the 8 leaves' files


def test_no_operation_follows_a_link_planted_on_the_way(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_bytes(b"s")
    root = _tree(tmp_path, {"out": str(outside), "rel": "../outside"}, dirs=("obj",))
    os.symlink(outside / "secret", root / "obj" / "a.o")
    os.mkfifo(root / "obj" / "fifo")
    with beneath.root_dir(root) as fd:
        for rel in ("out/x.o", "rel/x.o", "out/new/x.o"):
            with pytest.raises(Refusal, match="symlink"):
                beneath.open_dir(fd, os.path.dirname(rel), "output path", create=True)
            with pytest.raises(Refusal, match="symlink"):
                beneath.open_regular(fd, rel, "output")
        with pytest.raises(Refusal, match="is a symlink"):
            beneath.open_regular(fd, "obj/a.o", "output")
        with pytest.raises(Refusal, match="not a regular file"):
            beneath.open_regular(fd, "obj/fifo", "output")  # returns at once: no writer is waited for
        with pytest.raises(Refusal, match=r"holds '\.\.'"):
            beneath.open_dir(fd, "obj/../..", "output path")
        assert beneath.open_regular(fd, "obj/missing.o", "output") is None
        beneath.chown_dirs(fd, os.getuid(), os.getgid())
    assert sorted(p.name for p in outside.iterdir()) == ["secret"]  # nothing created through the links


def test_depth_is_counted_below_the_root_and_refused_past_the_bound() -> None:
    from goma_ext.worker.inputtree import NO_DEADLINE, fetch
    from tests.unit.test_worker_runner import _DictCas

    dirs, root = _bomb(1, 5)  # the root, then 5 levels below it
    cas = _DictCas({d: serialize(m) for d, m in dirs.items()})
    assert len(fetch(cas, root, TreeBounds(nodes=100, file_bytes=10**6, depth=5), NO_DEADLINE)) == 6  # type: ignore[arg-type]
    with pytest.raises(Refusal, match="deeper than 4 levels") as e:
        fetch(cas, root, TreeBounds(nodes=100, file_bytes=10**6, depth=4), NO_DEADLINE)  # type: ignore[arg-type]
    assert e.value.code == code_pb2.RESOURCE_EXHAUSTED


def test_directory_messages_larger_than_a_worker_reads_are_refused_unread() -> None:
    """One Directory past MESSAGE_BYTES, or all of them past TREE_MESSAGE_BYTES: RESOURCE_EXHAUSTED before a read
    (a client names the sizes, and a Directory padded with unknown fields is read whole)."""
    from goma_ext.worker import inputtree

    class Unread:
        def read_many(self, _digests: object) -> dict[Digest, bytes]:
            raise AssertionError("read")

    for size, why in ((inputtree.MESSAGE_BYTES + 1, "more than the"), (inputtree.MESSAGE_BYTES, None)):
        root = Digest("a" * 64, size)
        if why is None:  # at the bound: read (and here, refused by the fake), not refused for its size
            with pytest.raises(AssertionError, match="read"):
                inputtree.fetch(Unread(), root, TreeBounds(nodes=100, file_bytes=1 << 30, depth=8), inputtree.NO_DEADLINE)  # type: ignore[arg-type]
            continue
        with pytest.raises(Refusal, match=why) as e:
            inputtree.fetch(Unread(), root, TreeBounds(nodes=100, file_bytes=1 << 30, depth=8), inputtree.NO_DEADLINE)  # type: ignore[arg-type]
        assert e.value.code == code_pb2.RESOURCE_EXHAUSTED
