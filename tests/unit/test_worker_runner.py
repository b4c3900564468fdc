"""The worker runs a command in its own process group and kills the whole group at the timeout."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from goma_ext.remote.errors import RemoteError
from goma_ext.worker.runner import _run


def test_fast_command_returns_its_code_and_streams(tmp_path: Path) -> None:
    t = time.monotonic()
    code, out, err = _run(["sh", "-c", "echo hi; echo oops >&2; exit 3"], Path("/bin/sh"), tmp_path, {}, 10, tmp_path)
    assert (code, out, err) == (3, b"hi\n", b"oops\n")
    assert time.monotonic() - t < 10.0  # hang guard: the runner must not wait for anything beyond the process


def test_timeout_kills_the_process_group_including_grandchildren(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    script = f"(sleep 1; touch {marker}) & sleep 5"
    t = time.monotonic()
    with pytest.raises(RemoteError) as e:
        _run(["sh", "-c", script], Path("/bin/sh"), tmp_path, {}, 0.3, tmp_path)
    assert e.value.code == "DEADLINE_EXCEEDED" and time.monotonic() - t < 4.5  # killed before `sleep 5` ends
    time.sleep(1.2)
    assert not marker.exists()
