"""Fixtures shared by the worker's unit tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from goma_ext.worker.lease import _new_box


@pytest.fixture
def box() -> Iterator[Path]:
    """A per-action directory the runner uid (nobody, when root) can reach: pytest's tmp dirs are 0700."""
    base = Path(tempfile.mkdtemp(prefix="gx-unit-"))
    os.chmod(base, 0o711)
    try:
        yield _new_box(base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
