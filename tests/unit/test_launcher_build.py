"""The step launcher is compiled once per source and compiler for a user, not once per build directory: later
build directories get a copy from the user's cache, which is used only while no one else can write it or any
directory above it, and only for a regular ELF file of the user's."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gn_thinlto.steps.launcher_build import CACHE_SUBDIR, build_launcher, c_compiler
from tests.builds import REPO

LAUNCHER = "gn-thinlto/step-launcher"
REAL_CC = c_compiler()  # what gn gen would use (a new Debian with the example's packages has only clang-N)
pytestmark = pytest.mark.skipif(not REAL_CC, reason="no C compiler on PATH (./dev installs clang-19)")


@pytest.fixture()
def cache_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A cache home of our own where no one else can write on the way (not under /tmp, which everyone can)."""
    (REPO / ".state").mkdir(exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="launcher-cache-", dir=REPO / ".state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture()
def counted_cc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache_home: Path) -> Path:
    """A `cc` first on PATH (the first name gn gen looks for) that counts its runs (one a line in the returned
    file) and runs the compiler gn gen would have used."""
    bin_dir, runs = tmp_path / "bin", tmp_path / "cc-runs"
    bin_dir.mkdir()
    cc = bin_dir / "cc"
    cc.write_text(f'#!/bin/sh\necho run >> "{runs}"\nexec {REAL_CC} "$@"\n')
    cc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return runs


def _compiles(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def _build(out: Path) -> bytes:
    assert build_launcher(str(out), LAUNCHER) == ""
    launcher = out / LAUNCHER
    assert os.access(launcher, os.X_OK)
    return launcher.read_bytes()


def test_a_second_build_directory_copies_the_launcher(counted_cc: Path, cache_home: Path, tmp_path: Path) -> None:
    first, second = _build(tmp_path / "a"), _build(tmp_path / "b")
    assert _compiles(counted_cc) == 1 and first == second
    cache = cache_home / CACHE_SUBDIR
    assert (cache.stat().st_mode & 0o777) == 0o700 and len(list(cache.iterdir())) == 1


def test_a_cache_others_can_write_is_not_used(counted_cc: Path, cache_home: Path, tmp_path: Path) -> None:
    cache = cache_home / CACHE_SUBDIR
    cache.mkdir(parents=True)
    cache.chmod(0o777)
    _build(tmp_path / "a")
    _build(tmp_path / "b")
    assert _compiles(counted_cc) == 2 and list(cache.iterdir()) == []


def test_a_cache_under_a_directory_others_can_write_is_not_used(counted_cc: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))  # under /tmp: anyone may write there
    _build(tmp_path / "a")
    _build(tmp_path / "b")
    assert _compiles(counted_cc) == 2


def test_a_cached_file_that_is_no_launcher_is_compiled_anew(counted_cc: Path, cache_home: Path,
                                                            tmp_path: Path) -> None:
    first = _build(tmp_path / "a")
    (entry,) = (cache_home / CACHE_SUBDIR).iterdir()
    entry.write_bytes(b"#!/bin/sh\necho planted\n")
    assert _build(tmp_path / "b") == first and _compiles(counted_cc) == 2
    assert entry.read_bytes() == first  # stored again


def test_another_compiler_compiles_anew(counted_cc: Path, cache_home: Path, tmp_path: Path) -> None:
    _build(tmp_path / "a")
    cc = tmp_path / "bin" / "cc"
    cc.write_text(cc.read_text() + "# upgraded\n")  # another size and modification time
    _build(tmp_path / "b")
    assert _compiles(counted_cc) == 2 and len(list((cache_home / CACHE_SUBDIR).iterdir())) == 2
