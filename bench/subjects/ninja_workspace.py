"""Assemble the ninja code base as a GN workspace in the cache: sdist sources + bench/subjects/ninja_gn + example //build."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.fsio import EXAMPLE, copy_tree, write_if_changed
from bench.measure import BenchError
from bench.subjects import ninja_sdist

GN_FILES = Path(__file__).resolve().parent / "ninja_gn"
GOOGLETEST = Path("/usr/src/googletest/googletest")
# Extra GN args: ninja's sources are not -Wall -Wextra -Werror clean with clang 19.
# No CFI: ninja_test's fixtures derive from googletest classes in Debian's prebuilt (non-LTO) libgtest,
# which carry no CFI type information, so every virtual call through them would trap.
GN_ARGS = "treat_warnings_as_errors=false is_cfi=false"
BINARIES = ("ninja", "ninja_test") + ninja_sdist.PERF_BINARIES


def prepare(cache: Path) -> Path:
    """Return the workspace root, (re)creating it from pristine sources: edits of earlier runs are undone."""
    if not (GOOGLETEST / "src" / "gtest-all.cc").is_file():
        raise BenchError(f"{GOOGLETEST}: missing (Debian googletest); run ./dev setup")
    upstream = ninja_sdist.fetch(cache)
    root = cache / f"ninja-{ninja_sdist.VERSION}-gn"
    sync(upstream / "src", root / "src")
    sync(GOOGLETEST / "include", root / "third_party/googletest/include")
    sync(GOOGLETEST / "src", root / "third_party/googletest/src")
    copy_tree(EXAMPLE / "build", root / "build")
    write_if_changed(root / ".gn", (GN_FILES / "dot_gn").read_text())
    write_if_changed(root / "BUILD.gn", (GN_FILES / "BUILD.gn").read_text())
    return root


def sync(src: Path, dst: Path) -> None:
    """Make DST a copy of SRC; files whose content is unchanged keep their mtime (so builds stay incremental)."""
    if dst.is_dir():
        for path in dst.rglob("*"):
            if path.is_file() and not (src / path.relative_to(dst)).is_file():
                path.unlink()
    for path in sorted(src.rglob("*")):
        if path.is_file():
            target = dst / path.relative_to(src)
            if not target.is_file() or target.read_bytes() != path.read_bytes():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
