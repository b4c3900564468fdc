"""What a root cluster gives its workers for sandboxing: the runner user (created when missing) and a sandbox
directory that user can reach."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from goma_ext.cluster import sandboxing

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="the runner user and the 0711 fallback are for root clusters")


@as_root
def test_a_missing_runner_user_is_created_as_a_system_user(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def no_user(name: str) -> pwd.struct_passwd:
        raise KeyError(name)

    def fake_run(argv: list[str], **_kw: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(sandboxing.pwd, "getpwnam", no_user)
    monkeypatch.setattr(sandboxing.subprocess, "run", fake_run)
    assert sandboxing.ensure_runner(None) == "goma-ext-runner"
    assert calls == [["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "goma-ext-runner"]]
    assert sandboxing.ensure_runner("someone") == "someone" and len(calls) == 1  # a named user is never created


@as_root
def test_a_state_dir_the_runner_cannot_reach_gets_a_private_0711_sandbox_dir(tmp_path: Path) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir(mode=0o700)
    os.chmod(hidden, 0o700)
    made, owned = sandboxing.choose_sandbox_dir(hidden / "state")
    try:
        assert owned and not made.is_relative_to(hidden) and stat.S_IMODE(made.stat().st_mode) == 0o711
        assert sandboxing.searchable_by_others(made)
    finally:
        shutil.rmtree(made)
