"""What test_cache_durability's writer stores, in a module of its own: the writer is a new process in each of
the test's rounds, and importing the test module there would import pytest (0.2 of the writer's 0.25 CPU s of
start-up, before its first store)."""

from __future__ import annotations

import hashlib


def key(i: int) -> str:
    return hashlib.sha256(f"key {i}".encode()).hexdigest()


def content(i: int) -> bytes:
    """Output I: 1 KiB to 1 MiB, so that kills land in the middle of writes too."""
    size = 1024 << (i % 11)
    return hashlib.sha256(f"content {i}".encode()).digest() * (size // 32)
