"""Real CMake projects nobody here wrote, linked with `-fthinlto-distributor=goma-ext` (clang/lld 22): their own
tests pass, and every ThinLTO binary has the functions of lld's in-process ThinLTO build on the same flags and
a .text within 2% of it."""

from __future__ import annotations

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
    prereqs.ensure()
    dist, ref = tmp_path / "dtlto", tmp_path / "inproc"
    cmake_projects.configure(project, dist, cmake_projects.distributor_flags([f"--cache={tmp_path / 'cache'}"]))
    cmake_projects.build(dist)
    print(f"\n{project.sdist.name} through goma-ext dtlto: {cmake_projects.test(project, dist)}")
    links = stats.summarize(stats.read(dist / "goma_ext_dtlto.jsonl"))
    assert links["runs"] > 10 and links["failed"] == 0, links
    cmake_projects.configure(project, ref)
    cmake_projects.build(ref)
    for name in project.binaries:
        a, b = dist / name, ref / name
        assert defined_functions(a) == defined_functions(b), name
        assert abs(text_size(a) - text_size(b)) <= 0.02 * text_size(b), f"{name}: {text_size(a)} vs {text_size(b)}"
        print(f"  {name}: {len(defined_functions(a))} functions, .text {text_size(a)} vs in-process {text_size(b)}")
