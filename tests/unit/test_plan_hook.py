"""The GN hook's file handling on a copy of GN's snapshotted output (no gn or ninja needed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import gn_thinlto.hook

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.hook import PROJECT_MARKER_KEY, check_graph_in_place, run_hook
from gn_thinlto.regen import STATE_FILE
from gn_thinlto.steps.launcher_build import c_compiler

from .test_plan import BASIC_GN


@pytest.fixture
def out(tmp_path: Path) -> Path:
    dest = tmp_path / "out"
    shutil.copytree(BASIC_GN, dest)
    return dest


def test_hook_writes_graph_edits_gn_files_and_marks_project_json(out: Path, tmp_path: Path) -> None:
    with pytest.raises(GnThinltoError, match="without the gn-thinlto hook"):
        check_graph_in_place(out)
    config = tmp_path / "cfg.yaml"
    config.write_text("thin_link_pool_depth: 1\n")
    (out / "build.ninja.d").write_text("build.ninja.stamp: ../a/BUILD.gn\n")
    result = run_hook(out / "project.json", config, "/venv/bin/python")
    assert len(result.plan.links) == 5 and result.files_written > 5 and result.links_planned == 6
    check_graph_in_place(out)
    assert "depth = 1" in (out / "gn-thinlto/rules.ninja").read_text()
    assert "build ./app: link" not in (out / "obj/app/app.ninja").read_text()
    assert json.loads((out / "project.json").read_text())[PROJECT_MARKER_KEY]
    assert PROJECT_MARKER_KEY not in json.loads((out / "gn-thinlto/project.json").read_text())
    assert (out / "gn-thinlto/refused.txt").read_text().startswith("//refused:refused (./refused): ")
    manifest = json.loads((out / "gn-thinlto/app/thinlink.json").read_text())
    assert manifest["final_output"] == "./app" and manifest["target"] == "//app:app"
    launcher = f" {(out / 'gn-thinlto/step-launcher').resolve()}" if c_compiler() else ""
    hook_code = Path(gn_thinlto.hook.__file__).resolve()  # an upgrade plans again
    assert (out / "build.ninja.d").read_text() == \
        f"build.ninja.stamp: ../a/BUILD.gn {config.resolve()} {hook_code}{launcher}\n"
    # GN's files now carry our edits: running the hook again without a gn gen is refused.
    with pytest.raises(GnThinltoError, match="already carry gn-thinlto edits"):
        run_hook(out / "project.json", config, "/venv/bin/python")


def test_a_config_made_after_the_first_gen_is_read(out: Path) -> None:
    """Without a gn_thinlto.yaml, its directory (the source root) is a regeneration input: making the file there
    changes the directory's mtime, so the next ninja runs gn and this hook again, which reads it."""
    (out / "build.ninja.d").write_text("build.ninja.stamp: ../a/BUILD.gn\n")
    run_hook(out / "project.json", None, "/venv/bin/python")
    root = Path(json.loads((out / "gn-thinlto/project.json").read_text())["build_settings"]["root_path"])
    assert f" {root.resolve()} " in (out / "build.ninja.d").read_text()


def test_hook_output_is_deterministic(out: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    shutil.copytree(out, other)
    run_hook(out / "project.json", None, "/py")
    run_hook(other / "project.json", None, "/py")
    for path in sorted((out / "gn-thinlto").rglob("*")):
        if path.is_file() and path != out / STATE_FILE:  # the state holds mtimes
            assert path.read_bytes() == (other / path.relative_to(out)).read_bytes(), path
