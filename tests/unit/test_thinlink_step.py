"""The thin-link step skips lld when the manifest and the content of every input are those of its last success."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gn_thinlto.steps import thinlink


def _manifest(tmp: Path, inputs: list[str]) -> Path:
    linker = tmp / "clang++"
    if not linker.exists():
        linker.write_text("a linker")
    m = {
        "target": "//app:app", "argv": [str(linker), "-o", "x"], "inputs": inputs, "state": str(tmp / "state.json"),
        "bitcode": ["a.o"], "index_dir": str(tmp), "stage_dir": str(tmp / "stage"),
        "split_object": [str(tmp / "stage/lto.split.o"), str(tmp / "lto.split.o")],
        "used_list": str(tmp / "used.txt"), "final_rsp": str(tmp / "final.rsp"), "dyndep": str(tmp / "final.dd"),
        "rsp_path": str(tmp / "thinlink.rsp"), "final_output": "./app", "native_dir": str(tmp / "native"),
        "staged_used_list": str(tmp / "stage/used.txt"), "why_extract": str(tmp / "stage/why.txt"),
        "rsp_lines": inputs, "eager_inputs": inputs, "lazy_natives": [], "minimized": [],
    }
    path = tmp / "thinlink.json"
    path.write_text(json.dumps(m))
    return path


@pytest.fixture
def links(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Replace lld's run by one that writes every output and records the target (or fails, once asked to)."""
    calls: list[str] = []

    def fake(m: dict[str, Any], checked: bool = False) -> int:
        calls.append(m["target"])
        if os.environ.get("FAKE_THIN_LINK_FAILS"):
            return 1
        for path in thinlink._outputs(m):
            Path(path).write_text("out")
        return 0

    monkeypatch.setattr(thinlink, "thin_link", fake)
    return calls


def test_unchanged_inputs_skip_lld_and_changed_ones_do_not(tmp_path: Path, links: list[str]) -> None:
    a, b = tmp_path / "a.o", tmp_path / "b.o"
    a.write_bytes(b"BITCODE A")
    b.write_bytes(b"BITCODE B")
    manifest = _manifest(tmp_path, [str(a), str(b)])
    assert thinlink.run(str(manifest)) == 0 and len(links) == 1
    assert thinlink.run(str(manifest)) == 0 and len(links) == 1  # nothing changed
    a.write_bytes(b"BITCODE A")  # rewritten with the same content (a comment edit): new mtime, same bytes
    os.utime(a, ns=(1, 1))
    assert thinlink.run(str(manifest)) == 0 and len(links) == 1
    b.write_bytes(b"BITCODE B2")
    assert thinlink.run(str(manifest)) == 0 and len(links) == 2
    (tmp_path / "a.o.imports").unlink()  # an output is missing: ninja reran the edge for it
    assert thinlink.run(str(manifest)) == 0 and len(links) == 3
    manifest.write_text(manifest.read_text().replace("//app:app", "//app:app2"))  # regenerated plan
    assert thinlink.run(str(manifest)) == 0 and links[-1] == "//app:app2" and len(links) == 4
    (tmp_path / "clang++").write_text("a newer linker")  # a toolchain update under the same path
    assert thinlink.run(str(manifest)) == 0 and len(links) == 5
    assert thinlink.run(str(manifest)) == 0 and len(links) == 5


def test_a_failed_run_leaves_no_record(tmp_path: Path, links: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    a = tmp_path / "a.o"
    a.write_bytes(b"A")
    manifest = _manifest(tmp_path, [str(a)])
    thinlink.run(str(manifest))
    a.write_bytes(b"A2")
    monkeypatch.setenv("FAKE_THIN_LINK_FAILS", "1")
    assert thinlink.run(str(manifest)) == 1
    assert not (tmp_path / "state.json").exists()
    a.write_bytes(b"A")  # back to the recorded content: still runs, since the failed run removed the record
    monkeypatch.delenv("FAKE_THIN_LINK_FAILS")
    assert thinlink.run(str(manifest)) == 0 and len(links) == 3


def test_inputs_that_are_not_files_always_run(tmp_path: Path, links: list[str]) -> None:
    """A phony input (or a missing one) hides what it stands for, so the step cannot vouch for it."""
    manifest = _manifest(tmp_path, [str(tmp_path / "phony_group")])
    thinlink.run(str(manifest))
    thinlink.run(str(manifest))
    (tmp_path / "phony_group").mkdir()
    thinlink.run(str(manifest))
    assert len(links) == 3


def test_fingerprint_reads_only_files_whose_stat_moved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a.o", tmp_path / "b.o"
    a.write_bytes(b"A")
    b.write_bytes(b"B")
    first = thinlink.fingerprint(b"M", [str(a), str(b)], {})
    assert first is not None
    read: list[str] = []
    real = thinlink.file_sha256
    monkeypatch.setattr(thinlink, "file_sha256", lambda p: read.append(p) or real(p))
    os.utime(b, ns=(5, 5))
    second = thinlink.fingerprint(b"M", [str(a), str(b)], first[1])
    assert second is not None and second[0] == first[0] and read == [str(b)]
    other = thinlink.fingerprint(b"M2", [str(a), str(b)], second[1])
    assert other is not None and other[0] != first[0]  # the manifest is part of it


def test_a_manifest_without_a_state_path_always_runs(tmp_path: Path, links: list[str]) -> None:
    """Manifests written before the fingerprint existed (until gn reruns the hook) still build."""
    manifest = _manifest(tmp_path, [])
    m = json.loads(manifest.read_text())
    del m["state"], m["inputs"]
    manifest.write_text(json.dumps(m))
    assert thinlink.run(str(manifest)) == 0 and thinlink.run(str(manifest)) == 0 and len(links) == 2


def test_a_missing_partition_bitcode_file_runs_lld_again(tmp_path: Path, links: list[str]) -> None:
    a = tmp_path / "a.o"
    a.write_bytes(b"BITCODE A")
    manifest = _manifest(tmp_path, [str(a)])
    m = json.loads(manifest.read_text())
    m.update(partition_dir=str(tmp_path / "lto"), partitions=2, partition_mode="auto")
    manifest.write_text(json.dumps(m))
    (tmp_path / "lto").mkdir()
    assert thinlink.run(str(manifest)) == 0 and len(links) == 1
    assert thinlink.run(str(manifest)) == 0 and len(links) == 1
    (tmp_path / "lto/part1.bc").unlink()  # the partition edge's input: ninja reran the thin link for it
    assert thinlink.run(str(manifest)) == 0 and len(links) == 2


def test_the_fingerprint_knows_the_lld_the_driver_runs(tmp_path: Path) -> None:
    """The thin link runs ld.lld, a package of its own on Debian: an upgrade of lld alone must run it again. The
    driver's identity alone would not change."""
    import shutil

    assert thinlink.linker_of(["clang++-19", "-fuse-ld=lld", "a.o"]) == [
        os.path.join(os.path.dirname(os.path.realpath(shutil.which("clang++-19") or "")), "ld.lld")]
    assert thinlink.linker_of(["clang++-19", "--ld-path=/usr/bin/ld.lld-19"]) == ["/usr/bin/ld.lld-19"]
    assert thinlink.linker_of(["/usr/bin/ld.lld-19", "a.o"]) == []  # lld itself: its own identity is the driver's
    own = tmp_path / "ld.lld"
    own.write_bytes(b"#!/bin/sh\n")
    assert thinlink.linker_of(["clang++-19", f"-fuse-ld={own}"]) == [str(own)]
    assert thinlink.FINGERPRINT_VERSION != b"gn-thinlto-thinlink-v1"  # the steps' code is in it
