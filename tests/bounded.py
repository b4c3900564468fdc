"""Calls that must not block (a reader handed a FIFO): run in a thread, a block fails the test instead of hanging it."""

from __future__ import annotations

import threading
from collections.abc import Callable
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
