"""thinlto_base.pathsearch: PATH lookups remembered per (name, search path) for a second, never longer."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from thinlto_base import pathsearch


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(pathsearch.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(pathsearch, "_memo", {})
    return now


def _program(d: Path, name: str, mode: int = 0o755) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    p = d / name
    p.write_text("#!/bin/sh\n")
    p.chmod(mode)
    return p


def test_the_first_executable_file_on_the_path_wins(tmp_path: Path) -> None:
    _program(tmp_path / "a", "cc", 0o644)  # not executable
    (tmp_path / "b" / "cc").mkdir(parents=True)  # a directory
    found = _program(tmp_path / "c", "cc")
    _program(tmp_path / "d", "cc")
    search = os.pathsep.join(str(tmp_path / d) for d in "abcd")
    assert pathsearch.which("cc", search) == str(found)
    assert pathsearch.which("missing", search) is None


def test_a_lookup_is_remembered_for_a_second_then_made_again(tmp_path: Path, clock: list[float]) -> None:
    later = _program(tmp_path / "late", "cc")
    later.unlink()
    first = _program(tmp_path / "first", "cc")
    search = os.pathsep.join([str(tmp_path / "late"), str(tmp_path / "first")])
    assert pathsearch.which("cc", search) == str(first)
    _program(tmp_path / "late", "cc")  # installed earlier on the path
    clock[0] += pathsearch.MEMO_S / 2
    assert pathsearch.which("cc", search) == str(first)  # within the second: the remembered answer
    clock[0] += pathsearch.MEMO_S
    assert pathsearch.which("cc", search) == str(tmp_path / "late" / "cc")
    first.unlink()
    (tmp_path / "late" / "cc").unlink()
    clock[0] += pathsearch.MEMO_S
    assert pathsearch.which("cc", search) is None  # removed: forgotten after the second too


def test_each_search_path_has_its_own_answer_and_the_memo_is_bounded(tmp_path: Path) -> None:
    one, two = _program(tmp_path / "one", "cc"), _program(tmp_path / "two", "cc")
    assert pathsearch.which("cc", str(tmp_path / "one")) == str(one)
    assert pathsearch.which("cc", str(tmp_path / "two")) == str(two)
    for i in range(pathsearch.MEMO_ENTRIES + 10):
        pathsearch.which(f"tool{i}", str(tmp_path))
    assert len(pathsearch._memo) <= pathsearch.MEMO_ENTRIES


def test_without_a_search_path_it_is_PATH(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = _program(tmp_path / "bin", "cc")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert pathsearch.which("cc") == str(found)
