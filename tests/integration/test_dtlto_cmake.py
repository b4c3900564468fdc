"""A real CMake project nobody here wrote, ninja, linked with `-fthinlto-distributor=goma-ext` (clang/lld 22):
ninja_test passes, and has the functions of lld's in-process ThinLTO build on the same flags and a .text within
2% of it. (The C project, libdeflate, is held to the same in test_bench_dtlto.py: the DTLTO benchmark's smoke test
builds it in both modes anyway.)

CMake's Release build at -O1 instead of its -O3 (OPT, the same in both modes; the benchmark keeps -O3): the optimizer
is most of the compile (ninja's build_test.cc: 3.9 CPU s at -O0, about 20 at -O3), and what is tested here, the
distributor's jobs, their imports and outputs and the same code as lld's own backends, is the same at every level
that imports. Measured alone: 227 -> 193 CPU s for the compiles and both links."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench import prereqs
from bench.subjects import cmake_projects
from goma_ext.remote import stats
from tests.integration.test_graph_support import same_code

pytestmark = pytest.mark.slow
OPT = cmake_projects.release_at(1)


def test_ninja_through_the_distributor(tmp_path: Path) -> None:
    """The sources compile once: the in-process build's binaries are set aside, then the same build directory is
    configured again with the distributor's link flags, so only the links run again (the compile flags are the
    same in both modes, and ninja sees their commands unchanged)."""
    project = cmake_projects.NINJA
    prereqs.ensure()
    build, ref = tmp_path / "build", tmp_path / "inproc"
    cmake_projects.configure(project, build, extra=OPT)
    cmake_projects.build(build, *project.targets)
    for name in project.binaries:
        (ref / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / name, ref / name)
    compiled = _objects(build)
    cmake_projects.configure(project, build, cmake_projects.distributor_flags([f"--cache={tmp_path / 'cache'}"]),
                            extra=OPT)
    cmake_projects.build(build, *project.targets)
    after = _objects(build)
    assert {name: after.get(name) for name in compiled} == compiled, "the distributor's configuration compiled again"
    print(f"\n{project.sdist.name} through goma-ext dtlto: {cmake_projects.test(project, build)}")
    links = stats.summarize(stats.read(build / "goma_ext_dtlto.jsonl"))
    assert links["runs"] > 10 and links["failed"] == 0, links
    for line in same_code(build, ref, project.binaries):
        print(f"  {line}")


def _objects(build: Path) -> dict[str, int]:
    """Every object file of the project's build, with its modification time in nanoseconds (not those of the LTO
    check CMake compiles anew at every configure, CMakeFiles/_CMakeLTOTest-*)."""
    return {str(p.relative_to(build)): p.stat().st_mtime_ns for p in build.rglob("*.o")
            if not p.relative_to(build).as_posix().startswith("CMakeFiles/_CMake")}
