"""The code bases the benchmarks and the tests build, in one package (tests import their subjects from here, never
from a benchmark's internals):
- thin_program: a small C program compiled to ThinLTO bitcode, with its backends (the remote tests' actions);
- synth: synthetic GN workspaces (grids, Chromium-shaped component graphs) for scale, sharing and regeneration;
- ninja_sdist / ninja_workspace: ninja's own sources as a GN workspace (ninja_gn/ holds its BUILD.gn files);
- absl_workspace: abseil with its tests as a GN workspace, from Debian's source package (sdists: pinned archives);
- cmake_projects: real CMake projects (ninja, libdeflate) for DTLTO.

This module is the build benchmarks' list of them: the example workspace, ninja's own sources and abseil. Each is
a GN workspace copied into the cache (edits never touch the repository), with the three edits the
incremental cases make and a correctness check of the built binaries (not timed).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.fsio import EXAMPLE, write_workspace
from bench.measure import BenchError, run
from bench.subjects import absl_workspace, ninja_workspace, synth

BODY_EDIT = "{{ volatile int gn_thinlto_bench_edit = {n}; (void)gn_thinlto_bench_edit; }}"


@dataclass(frozen=True)
class Subject:
    name: str
    root: Path
    gn_args: str
    widely_imported: str  # a .cc whose functions many modules import (comment and body edits)
    body_anchor: str  # the line opening the function whose body is edited
    leaf: str  # a .cc only one binary links (touched)

    def edit_comment(self) -> None:
        path = self.root / self.widely_imported
        path.write_text(path.read_text() + f"// gn-thinlto bench edit {time.time_ns()}\n")

    def edit_body(self) -> None:
        path = self.root / self.widely_imported
        text = path.read_text()
        text = re.sub(r"\n *\{ volatile int gn_thinlto_bench_edit = \d+; \(void\)gn_thinlto_bench_edit; \}", "", text)
        if self.body_anchor not in text:
            raise BenchError(f"{path}: function {self.body_anchor!r} not found for the body edit")
        edit = BODY_EDIT.format(n=time.time_ns() % 1_000_000_007)
        path.write_text(text.replace(self.body_anchor, f"{self.body_anchor}\n  {edit}", 1))

    def touch_leaf(self) -> None:
        os.utime(self.root / self.leaf)


def example(cache: Path) -> Subject:
    root = cache / "example-ws"
    ninja_workspace.sync(EXAMPLE, root)
    return Subject("example", root, "", "base/numerics/clamp.cc", "int Clamp(int value, int lo, int hi) {",
                   "apps/calc/main.cc")


def ninja(cache: Path) -> Subject:
    root = ninja_workspace.prepare(cache)
    return Subject("ninja", root, ninja_workspace.GN_ARGS, "src/util.cc",
                   "void CanonicalizePath(char* path, size_t* len, uint64_t* slash_bits) {", "src/ninja.cc")


def abseil(cache: Path) -> Subject:
    """Abseil with its tests (bench/subjects/absl_workspace.py): the real project of 400+ TUs and several test binaries."""
    root = absl_workspace.prepare(cache)
    return Subject("abseil", root, absl_workspace.GN_ARGS, "absl/strings/str_cat.cc",
                   "std::string StrCat(const AlphaNum& a, const AlphaNum& b) {", "absl/cleanup/cleanup_test.cc")


def tiny(cache: Path) -> Subject:
    """A synthetic 2 binaries x 4 objects workspace: the smallest subject, for the test suite."""
    root = write_workspace(synth.grid(2, 4), cache / "tiny-ws")
    return Subject("tiny", root, "", "lib/o0.cc", "int f0(int x) {", "tests/t0.cc")


def micro(cache: Path) -> Subject:
    """tiny at its least: 2 binaries x 2 objects (one shared, imported by both mains, and each binary's own main).
    The test suite's smoke runs build it: every edit and code path of tiny, with fewer compiles and actions."""
    root = write_workspace(synth.grid(2, 1), cache / "micro-ws")
    return Subject("micro", root, "", "lib/o0.cc", "int f0(int x) {", "tests/t0.cc")


SUBJECTS = {"example": example, "ninja": ninja, "abseil": abseil, "tiny": tiny, "micro": micro}


def check(subject: Subject, out_dir: Path) -> str:
    """Run the built binaries' own checks; return a one-line summary, raise BenchError on a failure."""
    if subject.name == "ninja":
        with tempfile.TemporaryDirectory() as tmp:
            s = run([str(out_dir.resolve() / "ninja_test"), "--gtest_brief=1"], cwd=Path(tmp), check=False)
        if s.returncode != 0:
            raise BenchError(f"{out_dir}/ninja_test failed: {s.output.strip().splitlines()[-3:]}")
        passed = re.search(r"(\d+) tests? from .* ran", s.output)
        return f"ninja_test: {passed.group(1) if passed else '?'} tests passed"
    if subject.name == "abseil":
        return _gtest_binaries(subject, out_dir)
    exes = run(["gn", "ls", str(out_dir), "--type=executable", "--as=output"], cwd=subject.root).output.split()
    failed = []
    for exe in exes:
        s = run([str(out_dir.resolve() / exe)], cwd=out_dir, check=False)
        expected = "" if subject.name in ("tiny", "micro") else f"OK {Path(exe).name}"
        if s.returncode != 0 or expected not in s.output:
            failed.append(exe)
    if failed or not exes:
        raise BenchError(f"{out_dir}: self-checks failed: {', '.join(failed) or 'no executables'}")
    return f"{len(exes)}/{len(exes)} self-checks OK"


def _gtest_binaries(subject: Subject, out_dir: Path) -> str:
    """Run every test binary GN builds (4 at a time, each in a scratch directory: many of abseil's tests
    wait rather than compute); one line: binaries and tests passed. BenchError on the first failure."""
    exes = run(["gn", "ls", str(out_dir), "--type=executable", "--testonly=true", "--as=output"],
               cwd=subject.root).output.split()
    if not exes:
        raise BenchError(f"{out_dir}: no test binaries")

    def one(exe: str) -> int:
        with tempfile.TemporaryDirectory() as tmp:
            s = run([str(out_dir.resolve() / exe), "--gtest_brief=1"], cwd=Path(tmp), check=False,
                    env={"TEST_TMPDIR": tmp})
        if s.returncode != 0:
            raise BenchError(f"{out_dir}/{exe} failed: {s.output.strip().splitlines()[-3:]}")
        ran = re.search(r"\[  PASSED  \] (\d+) tests?", s.output)
        return int(ran.group(1)) if ran else 0

    with ThreadPoolExecutor(4) as pool:
        passed = sum(pool.map(one, exes))
    return f"{len(exes)} test binaries: {passed} tests passed"
