"""Integration fixtures: the example built through the graph once per session (per pytest-xdist worker)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_ROOT, copy_build_dir

from .test_graph_support import Build, gen_and_build


@pytest.fixture(scope="session")
def example_tree(tmp_path_factory: pytest.TempPathFactory) -> Build:
    """A copy of the example's sources (ROOT/../chromium_style) built through the graph with the default settings
    (ROOT/../out). Tests take copies (`copy_example_tree`), never this one."""
    root = tmp_path_factory.mktemp("example-tree") / "chromium_style"
    shutil.copytree(EXAMPLE_ROOT, root)
    return gen_and_build(root, root.parent / "out")


def copy_example_tree(tree: Build, dest: Path) -> Build:
    """DEST/chromium_style and DEST/out: a copy of TREE, sources and build side by side as there (so every relative
    path in the build holds) with their modification times, so ninja finds it up to date; a test edits and
    regenerates its copy without compiling what did not change."""
    root, out = dest / "chromium_style", dest / "out"
    shutil.copytree(tree.root, root, symlinks=True)
    copy_build_dir(tree.out, out)
    return Build(root, out)
