"""[chromium] The dyndep-free graph (config `dyndep: false`, for builders without dyndep such as Siso) on the
example: no dyndep anywhere, every final link waits for all of its backends, unused lazy members compile
to empty objects, and comment, body and leaf edits rebuild what they must and the binaries still pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gn_thinlto.steps.elf_probe import has_real_symbols
from gn_thinlto.steps.thinlink_paths import manifest_natives
from tests.builds import copy_example_sources, copy_example_tree

from .test_graph_support import Build, edit_and_rebuild, executables, gen_and_build

pytestmark = pytest.mark.slow
PROBE = "base/inline_probe.cc"


def _without_dyndep(root: Path, out: Path, targets: tuple[str, ...] = ()) -> Build:
    config = root.parent / "gn_thinlto_nodyndep.yaml"
    config.write_text("dyndep: false\n")
    return gen_and_build(root, out, "--config", str(config), targets=targets)


@pytest.fixture(scope="module")
def built(example_tree: Build, tmp_path_factory: pytest.TempPathFactory) -> Build:
    """A copy of the session's build of the example generated again without dyndep: the compile commands do not
    change, so only the graph's link steps run again, now in the dyndep-free graph."""
    copy = copy_example_tree(example_tree, tmp_path_factory.mktemp("nodyndep"))
    return _without_dyndep(copy.root, copy.out)


def _check_all(b: Build) -> None:
    names = executables(b)
    assert len(names) >= 6
    for name in names:
        assert b.run_binary(name) == f"OK {name}"


def test_report_of_the_clean_build_without_dyndep(tmp_path: Path) -> None:
    """[trace] `gn-thinlto report --build` on the dyndep-free graph: a clean build's critical path (one binary's)
    runs compile -> thin link -> backend -> final link."""
    from .test_graph_support import gn_thinlto

    root = copy_example_sources(tmp_path)
    clean = _without_dyndep(root, tmp_path / "out", targets=("crc_tool",))
    proc = gn_thinlto("report", str(clean.out), "--build", "--json")
    assert proc.returncode == 0, proc.stderr
    phases = [s["phase"] for s in json.loads(proc.stdout)["critical_path"] if s["phase"] != "other"]
    assert phases == ["compile", "thin link", "backend", "final link"], phases


def test_builds_without_dyndep_and_passes_self_checks(built: Build) -> None:
    for path in (built.out / "gn-thinlto").rglob("*.ninja"):
        assert not [line for line in path.read_text().splitlines() if line.strip().startswith("dyndep =")], path
    targets = built.ninja("-t", "targets", "all").splitlines()  # what the graph builds (the copy keeps old files)
    assert targets and not [t for t in targets if t.split(":")[0].endswith("final.dd")]
    _check_all(built)


def test_unused_lazy_members_compile_to_empty_objects(built: Build) -> None:
    empty = 0
    for manifest in (built.out / "gn-thinlto").glob("*/thinlink.json"):
        m = json.loads(manifest.read_text())
        used = set((built.out / m["used_list"]).read_text().split())
        for bitcode, native in manifest_natives(m).items():
            assert (built.out / native).is_file(), native
            if bitcode not in used:
                assert not has_real_symbols(str(built.out / native)), native
                empty += 1
    assert empty > 0


def test_comment_edit_relinks_nothing(built: Build) -> None:
    r = edit_and_rebuild(built, PROBE, "namespace base {", "// comment\nnamespace base {")
    assert r.changed_index == set()
    assert not [o for o in r.ran if "exe.unstripped/" in o or o.endswith(".so")], r.ran
    assert all(line.startswith("hit ") for line in r.cache_lines)


def test_body_edit_rebuilds_importers_and_stays_correct(built: Build) -> None:
    r = edit_and_rebuild(built, PROBE, "return x * 3 + 1;", "return x > 1000000 ? x * 3 + 2 : x * 3 + 1;")
    assert any("calc/" in p for p in r.changed_index)
    assert any(o.endswith("exe.unstripped/calc") for o in r.ran), r.ran
    _check_all(built)
    assert "no work to do" in built.ninja("-n")


def test_leaf_touch_rebuilds_no_link(built: Build) -> None:
    before = len(built.log_entries())
    (built.root / "tools/crc_tool/main.cc").touch()
    built.ninja()
    ran = built.ran_since(before)
    assert any(o.endswith("crc_tool.main.o") for o in ran)
    assert not [o for o in ran if "exe.unstripped/" in o], ran
    _check_all(built)
