"""Real CMake projects built with clang/lld 22 ThinLTO: in lld's process, or through a DTLTO distributor.

The sources come from pinned PyPI sdists (bench.subjects.sdists); GoogleTest is Debian's libgtest-dev (1.12.1, the
version ninja's CMakeLists.txt would download), so nothing needs the network but PyPI. The compile flags are the
same in both modes; only the link flags differ.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.measure import BenchError, Sample, run
from bench.subjects import sdists

GOMA_EXT = str(Path(sys.executable).parent / "goma-ext")
TOOLCHAIN = ("-DCMAKE_C_COMPILER=clang-22", "-DCMAKE_CXX_COMPILER=clang++-22", "-DCMAKE_AR=/usr/bin/llvm-ar-22",
             "-DCMAKE_RANLIB=/usr/bin/llvm-ranlib-22", "-DCMAKE_BUILD_TYPE=Release",
             "-DCMAKE_C_FLAGS=-flto=thin", "-DCMAKE_CXX_FLAGS=-flto=thin")


@dataclass(frozen=True)
class CMakeProject:
    sdist: sdists.Sdist
    defines: tuple[str, ...]
    test_command: tuple[str, ...]  # run in the build directory
    test_summary: str  # the start of the line that sums up a passing run
    binaries: tuple[str, ...]  # linked through ThinLTO, compared between the modes
    bench_target: str  # the link bench/dtlto_bench.py times
    # BENCH_TARGET's own run (in the build directory), for a directory where only it is built: the command and the
    # start of the line that sums up a passing run
    bench_check: tuple[tuple[str, ...], str]
    only_binaries: bool = False  # build BINARIES alone (the tests run nothing else), not every target

    @property
    def targets(self) -> tuple[str, ...]:
        """What ninja builds for the binaries and the tests (empty: everything)."""
        return self.binaries if self.only_binaries else ()


PROJECTS: dict[str, CMakeProject] = {}
NINJA = CMakeProject(
    sdists.NINJA,
    # ninja's CMakeLists.txt takes an installed GoogleTest (find_package(GTest): Debian's prebuilt libgtest.a)
    # before it would download one: ninja_test's sources are ThinLTO bitcode, GoogleTest is native code. (Built
    # from /usr/src/googletest instead, gtest-all.cc cost 17 CPU s to compile and a backend in every link.)
    ("-DBUILD_TESTING=ON", "-DFETCHCONTENT_FULLY_DISCONNECTED=ON"),  # never a download: no libgtest-dev, an error
    ("./ninja_test",),
    "[  PASSED  ]",
    ("ninja_test",),  # ninja's sources and its tests, against libgtest.a: the `ninja` program adds only main()
    "ninja_test",
    (("./ninja_test",), "[  PASSED  ]"),
    only_binaries=True,  # not the eight perftest/bench programs: each one more ThinLTO link, run by no test
)
LIBDEFLATE = CMakeProject(
    sdists.LIBDEFLATE,
    ("-DLIBDEFLATE_BUILD_TESTS=ON",),
    ("ctest", "--output-on-failure"),
    "100% tests passed",
    ("libdeflate.so.0", "programs/libdeflate-gzip", "programs/benchmark", "programs/checksum",
     "programs/test_checksums", "programs/test_slow_decompression"),
    "programs/benchmark",
    # it compresses its FILE (here itself) in chunks and decompresses each, failing unless it gets the chunk back
    (("programs/benchmark", "-6", "programs/benchmark"), "Compressed "),
)


def distributor_flags(options: Sequence[str] = (), distributor: str = GOMA_EXT) -> str:
    """clang's link flags that make goma-ext (with OPTIONS) lld's DTLTO distributor."""
    return f"-fthinlto-distributor={distributor} -Xthinlto-distributor={','.join(('dtlto', *options))}"


def release_at(level: int) -> tuple[str, ...]:
    """cmake arguments that compile CMake's Release build at -O<LEVEL> instead of its -O3 (NDEBUG kept): the
    tests' smaller builds. The optimizer is most of a compile, and what they test (the distributor's jobs, imports
    and outputs, the same code as lld's own backends) is the same at every level that imports."""
    return tuple(f"-DCMAKE_{lang}_FLAGS_RELEASE=-O{level} -DNDEBUG" for lang in ("C", "CXX"))


def configure(project: CMakeProject, build: Path, link_flags: str = "", cache: Path = sdists.DEFAULT_CACHE,
              env: Mapping[str, str] | None = None, extra: Sequence[str] = ()) -> None:
    """cmake -G Ninja for PROJECT into BUILD; LINK_FLAGS go after -fuse-ld=lld on every link; EXTRA are more
    cmake arguments."""
    src = sdists.fetch(project.sdist, cache)
    flags = f"-fuse-ld=lld {link_flags}".strip()
    run(["cmake", "-G", "Ninja", "-S", str(src), "-B", str(build), *TOOLCHAIN, *project.defines,
         f"-DCMAKE_EXE_LINKER_FLAGS={flags}", f"-DCMAKE_SHARED_LINKER_FLAGS={flags}", *extra], env=env)


def build(build_dir: Path, *targets: str, env: Mapping[str, str] | None = None) -> Sample:
    """ninja in BUILD_DIR (TARGETS, or everything): wall, CPU, the largest process's peak RSS."""
    return run(["ninja", "-C", str(build_dir), *targets], env=env)


def test(project: CMakeProject, build_dir: Path) -> str:
    """The project's own tests, run in BUILD_DIR: the line that sums up a passing run (BenchError otherwise)."""
    return _passed(project.test_command, project.test_summary, build_dir)


def check_bench_target(project: CMakeProject, build_dir: Path) -> str:
    """PROJECT's bench target run in BUILD_DIR (`bench_check`), where only it may be built: the line that sums up
    a passing run (BenchError otherwise)."""
    return _passed(*project.bench_check, build_dir)


def _passed(command: Sequence[str], summary: str, build_dir: Path) -> str:
    """COMMAND's line (stripped) that starts with SUMMARY, run in BUILD_DIR (BenchError if it fails or has none).

    It gets a temporary directory of its own, removed after it: ninja_test's BuildWithQueryDepsLogTest leaves its
    empty directory behind in $TMPDIR, one per run."""
    with tempfile.TemporaryDirectory(prefix="tests-tmp-", dir=build_dir.resolve()) as tmp:  # absolute: they chdir
        out = run(list(command), cwd=build_dir, env={"TMPDIR": tmp}).output
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith(summary)]
    if not lines:
        raise BenchError(f"{' '.join(command)} in {build_dir}: no {summary!r} line")
    return lines[-1]


PROJECTS.update(ninja=NINJA, libdeflate=LIBDEFLATE)
