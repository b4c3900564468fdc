"""What the processes of one test run share: pytest-xdist's workers each hold their own session fixtures, so a
session cluster or the example's build would be made once per worker. `once` makes such a thing once per run,
in a directory the run's own process (xdist's controller, or the one process without xdist) made: the first
worker that needs it makes it under a lock, the others wait for it and use it. The run's own process undoes
them all at its end (`end_all`), when every worker has finished.

A thing's `make` records how it is undone: a function `end(directory)`, named by module and name, which the
run's own process imports and calls."""

from __future__ import annotations

import fcntl
import importlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

RUN_DIR_ENV = "GN_THINLTO_TEST_RUN_DIR"  # set by the run's own process before the workers start
_READY, _END = ".ready", ".end"


def begin() -> None:
    """In the run's own process, before any worker starts (they inherit the environment)."""
    if RUN_DIR_ENV not in os.environ:
        os.environ[RUN_DIR_ENV] = tempfile.mkdtemp(prefix="gxt-run-")


def once(name: str, make: Callable[[Path], None], end: Callable[[Path], None] | None = None) -> Path:
    """The directory NAME of this run, made by MAKE(directory) unless a process of the run already did. A MAKE
    that fails leaves nothing behind (END runs on what it made) and the next caller tries again."""
    run_dir = Path(os.environ[RUN_DIR_ENV])
    d = run_dir / name
    with open(run_dir / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when this process dies, too
        if (d / _READY).exists():
            return d
        if d.exists():
            _end(d)
        d.mkdir(mode=0o700)
        if end is not None:
            (d / _END).write_text(f"{end.__module__}:{end.__qualname__}")
        try:
            make(d)
        except BaseException:
            _end(d)
            raise
        (d / _READY).touch()
    return d


def end_all() -> None:
    """In the run's own process, at its end: undo what `once` made, newest first, then remove the run's
    directory."""
    run_dir = Path(os.environ.pop(RUN_DIR_ENV, ""))
    if not run_dir.name:
        return
    made = [p for p in run_dir.iterdir() if p.is_dir()]
    for d in sorted(made, key=lambda p: -(p / _READY).stat().st_mtime_ns if (p / _READY).exists() else 0):
        _end(d)
    shutil.rmtree(run_dir, ignore_errors=True)


def _end(d: Path) -> None:
    try:
        if (d / _END).exists():
            module, name = (d / _END).read_text().split(":")
            getattr(importlib.import_module(module), name)(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
