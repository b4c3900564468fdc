"""Input roots are canonical Merkle trees of exec-root-relative files; actions carry no absolute paths."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from goma_ext.reapi import action
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import InputError
from goma_ext.reapi.merkle import build_input_tree
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.client import check_arguments, exec_relative
from tests.bounded import returns_within


def _tree(root: Path) -> None:
    (root / "out" / "obj").mkdir(parents=True)
    (root / "out" / "obj" / "a.o").write_bytes(b"A")
    (root / "out" / "obj" / "b.o").write_bytes(b"B")
    (root / "src").mkdir()
    (root / "src" / "x.c").write_bytes(b"int x;")


def test_same_files_in_any_order_or_place_give_the_same_root(tmp_path: Path) -> None:
    _tree(tmp_path / "one")
    _tree(tmp_path / "two")
    a = build_input_tree(tmp_path / "one", ["out/obj/b.o", "src/x.c", "out/obj/a.o"])
    b = build_input_tree(tmp_path / "two", ["src/../src/x.c", "out/obj/a.o", "out/obj/b.o", "out/obj/a.o"])
    assert a.root == b.root
    assert a.file_bytes == 1 + 1 + 6
    root = re_pb2.Directory()
    root.ParseFromString(a.blobs[a.root].read())
    assert [d.name for d in root.directories] == ["out", "src"]
    assert Digest.of_bytes(a.blobs[a.root].read()) == a.root


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "out/../../x", ""])
def test_paths_outside_the_exec_root_are_refused(tmp_path: Path, bad: str) -> None:
    _tree(tmp_path)
    with pytest.raises(InputError):
        build_input_tree(tmp_path, [bad])


def test_missing_input_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="nope"):
        build_input_tree(tmp_path, ["nope"])


def test_absolute_arguments_and_outside_cwd_are_refused(tmp_path: Path) -> None:
    check_arguments(["/usr/bin/clang-19", "-c", "obj/a.o", "-fthinlto-index=obj/a.o.thinlto.bc"])
    with pytest.raises(InputError):
        check_arguments(["clang-19", "-fprofile-use=/abs/x.profdata"])
    assert exec_relative(tmp_path, tmp_path / "out") == "out"
    with pytest.raises(InputError):
        exec_relative(tmp_path / "out", tmp_path)


def test_action_digest_depends_on_salt_and_platform_but_not_property_order() -> None:
    root = Digest.of_bytes(b"")
    spec = action.ActionSpec(("clang-19", "-c"), "out", ("b.o", "a.o"), (("z", "1"), ("a", "2")), root)
    again = action.ActionSpec(("clang-19", "-c"), "out", ("a.o", "b.o"), (("a", "2"), ("z", "1")), root)
    assert action.build(spec).action_digest == action.build(again).action_digest
    salted = action.ActionSpec(("clang-19", "-c"), "out", ("a.o", "b.o"), (("a", "2"), ("z", "1")), root, salt=b"s")
    assert action.build(salted).action_digest != action.build(spec).action_digest


class _ReadsCounted:
    """The CAS part fetch_outputs uses: the blobs it holds, and every read asked of it."""

    def __init__(self, *blobs: bytes) -> None:
        self.blobs = {Digest.of_bytes(b): b for b in blobs}
        self.asked: list[list[Digest]] = []

    def read_many(self, digests: Iterable[Digest]) -> dict[Digest, bytes]:
        wanted = list(digests)
        self.asked.append(wanted)
        return {d: self.blobs[d] for d in wanted}


def _result(out: str, data: bytes, stderr: bytes = b"") -> re_pb2.ActionResult:
    result = re_pb2.ActionResult(exit_code=0)
    result.output_files.add(path=out, digest=Digest.of_bytes(data).to_proto())
    if stderr:
        result.stderr_digest.CopyFrom(Digest.of_bytes(stderr).to_proto())
    return result


def test_an_output_already_here_is_not_fetched_only_touched(tmp_path: Path) -> None:
    """A backend reruns (its index changed) to the same object: its bytes are not downloaded. The file gets a new
    mtime, as a compiler writing it would give it (a link rule has no restat: an old mtime would run it at every
    build). Anything else at the destination is replaced, never followed or read blocking."""
    from goma_ext.remote.client import fetch_outputs

    out = tmp_path / "obj" / "x.o"
    prepared = cast(Any, SimpleNamespace(outputs=("obj/x.o",), destinations=(out,)))
    cas = _ReadsCounted(b"one", b"warning: x\n")
    got = fetch_outputs(cast(Any, cas), _result("obj/x.o", b"one", b"warning: x\n"), prepared)
    assert out.read_bytes() == b"one" and got.stderr == b"warning: x\n" and got.kept_outputs == 0
    os.utime(out, ns=(1, 1))
    inode = out.stat().st_ino
    got = fetch_outputs(cast(Any, cas), _result("obj/x.o", b"one", b"warning: x\n"), prepared)
    assert cas.asked[-1] == [Digest.of_bytes(b"warning: x\n")]  # the stream only: the object is here
    assert (got.kept_outputs, got.kept_bytes, got.stderr) == (1, 3, b"warning: x\n")
    assert out.stat().st_ino == inode and out.stat().st_mtime_ns > 1  # the same file, written as if anew
    for planted in ("link", "fifo", "same size"):
        out.unlink()
        target = tmp_path / "elsewhere"
        target.write_bytes(b"one")
        if planted == "link":
            out.symlink_to(target)
        elif planted == "fifo":
            os.mkfifo(out)
        else:
            out.write_bytes(b"two")
        got = returns_within(lambda: fetch_outputs(cast(Any, cas), _result("obj/x.o", b"one"), prepared))
        assert got.kept_outputs == 0 and cas.asked[-1] == [Digest.of_bytes(b"one")], planted
        assert not out.is_symlink() and out.read_bytes() == b"one" and target.read_bytes() == b"one", planted
    cas = _ReadsCounted(b"two!")
    result = _result("obj/x.o", b"two!")
    result.output_files[0].is_executable = True
    fetch_outputs(cast(Any, cas), result, prepared)
    assert out.read_bytes() == b"two!" and out.stat().st_mode & 0o111
    out.chmod(0o644)  # the bytes, but not the executable a remote link's binary must be: written again
    assert fetch_outputs(cast(Any, cas), result, prepared).kept_outputs == 0 and out.stat().st_mode & 0o111
    assert fetch_outputs(cast(Any, cas), result, prepared).kept_outputs == 1
    assert sorted(p.name for p in out.parent.iterdir()) == ["x.o"]


@pytest.mark.parametrize("path", ["../../../../etc/cron.d/x", "..", "../", "obj/../../..", "/etc/passwd"])
def test_paths_that_leave_the_exec_root_are_refused(tmp_path: Path, path: str) -> None:
    """Inputs and outputs alike: an output path like ../../../../etc/cron.d/x is never written outside."""
    from goma_ext.remote.client import _under

    with pytest.raises(InputError):
        _under("out", path)
    assert _under("out/Release", "../gen/x.o") == "out/gen/x.o"
