"""[fresh] ./dev holds the one Debian package list; the benchmarks check it and never install anything."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import prereqs
from bench.measure import BenchError
from tests.conftest import REPO


def dev_packages() -> set[str]:
    proc = subprocess.run(["bash", str(REPO / "dev"), "packages"], capture_output=True, text=True, check=True)
    return set(proc.stdout.split())


def test_every_package_the_benchmarks_use_is_in_dev() -> None:
    assert set(prereqs.PACKAGES) <= dev_packages()


def test_a_missing_package_is_one_line_naming_dev(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(prereqs, "PACKAGES", {"googletest": tmp_path / "absent", "time": tmp_path})
    with pytest.raises(BenchError) as e:
        prereqs.ensure()
    assert "\n" not in str(e.value) and "googletest" in str(e.value) and "./dev setup" in str(e.value)
    assert "time" not in str(e.value).split(":")[0]


def test_nothing_outside_dev_installs_packages() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    this = Path(__file__).relative_to(REPO).as_posix()
    installers = [p for p in tracked if p.endswith(".py") and p != this and '"apt-get"' in (REPO / p).read_text()]
    assert installers == []


def test_the_venv_has_what_the_benchmarks_import() -> None:
    """./dev installs the test and bench extras (the report draws its plots with matplotlib)."""
    import importlib.util

    text = (REPO / "dev").read_text()
    assert "extras=test,bench" in text and 'pip install -e ".[$extras]"' in text
    assert importlib.util.find_spec("matplotlib") is not None
