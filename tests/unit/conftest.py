"""Fixtures shared by the worker's unit tests."""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from goma_ext.worker.lease import _new_box


@pytest.fixture
def box() -> Iterator[Path]:
    """A per-action directory the runner uid (nobody, when root) can reach: pytest's tmp dirs are 0700. Removed
    by `rm`, also when a failed test left a tree deeper than Python's rmtree can walk."""
    base = Path(tempfile.mkdtemp(prefix="gx-unit-"))
    os.chmod(base, 0o711)
    try:
        yield _new_box(base)
    finally:
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(base)], check=False)
