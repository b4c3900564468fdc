"""Calls that must not block (a reader handed a FIFO): run in a thread, a block fails the test instead of hanging it;
and commands that must end by themselves, killed with everything they started when they do not."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


def returns_within(call: Callable[[], T], seconds: float = 10.0) -> T:
    """CALL's value, or its exception; an assertion error when it has not returned within SECONDS."""
    got: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            got.append((True, call()))
        except BaseException as e:  # handed to the test's own thread
            got.append((False, e))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert got, f"blocked for {seconds:g} s"
    ok, value = got[0]
    if not ok:
        raise value  # type: ignore[misc]
    return value  # type: ignore[return-value]


def ends_within(argv: Sequence[str], seconds: float = 60.0,
                env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """ARGV's result (text output captured); when it has not ended within SECONDS (a daemon that started where it
    should have refused), it and every process it started are killed as a group, and the test fails."""
    import pytest

    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=dict(env) if env is not None else None)
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"still running after {seconds:g} s: {' '.join(argv)}")
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)



def started(argv: Sequence[str], seconds: float = 10.0) -> subprocess.Popen[bytes]:
    """ARGV started in a session of its own, returned once its /proc command line is ARGV: Popen may return while
    the kernel is still inside execve (a vfork parent wakes when the new memory is installed, before the arguments'
    place in it is recorded), and a test that reads the command line at once could see it empty."""
    proc = subprocess.Popen(list(argv), start_new_session=True)
    want = b"".join(os.fsencode(a) + b"\0" for a in argv)
    deadline = time.monotonic() + seconds
    while True:
        try:
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                if f.read() == want:
                    return proc
        except OSError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise AssertionError(f"{argv[0]}: its command line did not appear within {seconds:g} s")
        time.sleep(0.01)
