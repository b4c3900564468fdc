"""Real CMake projects nobody here wrote, linked with `-fthinlto-distributor=goma-ext` (clang/lld 22): their own
tests pass, and every ThinLTO binary has the functions of lld's in-process ThinLTO build on the same flags and
a .text within 2% of it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import prereqs
from bench.subjects import cmake_projects
from bench.subjects.cmake_projects import CMakeProject
from goma_ext.remote import stats
from tests.integration.test_graph_support import defined_functions, text_size

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("project", [cmake_projects.NINJA, cmake_projects.LIBDEFLATE], ids=lambda p: p.sdist.name)
def test_cmake_project_through_the_distributor(project: CMakeProject, tmp_path: Path) -> None:
    """The sources compile once: the in-process build's binaries are set aside, then the same build directory is
    configured again with the distributor's link flags, so only the links run again (the compile flags are the
    same in both modes, and ninja sees their commands unchanged)."""
    prereqs.ensure()
    build, ref = tmp_path / "build", tmp_path / "inproc"
    cmake_projects.configure(project, build)
    cmake_projects.build(build, *project.targets)
    for name in project.binaries:
        (ref / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / name, ref / name)
    compiled = _objects(build)
    cmake_projects.configure(project, build, cmake_projects.distributor_flags([f"--cache={tmp_path / 'cache'}"]))
    cmake_projects.build(build, *project.targets)
    after = _objects(build)
    assert {name: after.get(name) for name in compiled} == compiled, "the distributor's configuration compiled again"
    print(f"\n{project.sdist.name} through goma-ext dtlto: {cmake_projects.test(project, build)}")
    links = stats.summarize(stats.read(build / "goma_ext_dtlto.jsonl"))
    assert links["runs"] > 10 and links["failed"] == 0, links
    for name in project.binaries:
        a, b = build / name, ref / name
        assert defined_functions(a) == defined_functions(b), name
        assert abs(text_size(a) - text_size(b)) <= 0.02 * text_size(b), f"{name}: {text_size(a)} vs {text_size(b)}"
        print(f"  {name}: {len(defined_functions(a))} functions, .text {text_size(a)} vs in-process {text_size(b)}")


def _objects(build: Path) -> dict[str, int]:
    """Every object file of the project's build, with its modification time in nanoseconds (not those of the LTO
    check CMake compiles anew at every configure, CMakeFiles/_CMakeLTOTest-*)."""
    return {str(p.relative_to(build)): p.stat().st_mtime_ns for p in build.rglob("*.o")
            if not p.relative_to(build).as_posix().startswith("CMakeFiles/_CMake")}
