"""`goma-ext index` and `goma-ext inputs` through the real argument parser and error handling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goma_ext.cli import main

DATA = Path(__file__).parent / "index_data"


def test_index_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", str(DATA / "llvm22-a.o.thinlto.bc"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == 12 and doc["skip"] is False and doc["empty"] is False
    assert [m["path"] for m in doc["modules"]][:2] == ["a.o", "b.o"]
    assert doc["summary_counts"]["a.o"] == 2 and all(len(m["hash"]) == 40 for m in doc["modules"])


def test_index_text_skip_and_empty(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["index", str(DATA / "llvm19-skip.thinlto.bc")]) == 0
    assert "skip yes, 0 modules" in capsys.readouterr().out
    (tmp_path / "e.thinlto.bc").write_bytes(b"")
    assert main(["index", str(tmp_path / "e.thinlto.bc")]) == 0
    assert "empty (zero-byte) index" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.thinlto.bc"
    bad.write_bytes((DATA / "llvm19-a.o.thinlto.bc").read_bytes()[:40])
    assert main(["index", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("goma-ext: error: ") and err.count("\n") == 1 and "byte " in err and "MODULE_BLOCK" in err
    assert main(["index", str(DATA / "elf-head.o")]) == 2
    assert "bad magic" in capsys.readouterr().err
    assert main(["inputs", "--"]) == 2
    assert "give the backend command" in capsys.readouterr().err


def test_inputs_lines(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    (tmp_path / "a.o").write_bytes((DATA / "llvm19-a.o").read_bytes())
    (tmp_path / "a.o.thinlto.bc").write_bytes((DATA / "llvm19-a.o.thinlto.bc").read_bytes())
    argv = ["inputs", "--cwd", str(tmp_path), "--", "clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc"]
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines() == ["a.o", "a.o.thinlto.bc", "b.o", "libd.a"]
