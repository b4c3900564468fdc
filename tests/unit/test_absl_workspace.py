"""bench/subjects/absl_workspace.py: abseil's CMakeLists.txt calls turned into GN targets and test binaries."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.measure import BenchError
from bench.subjects.absl_workspace import parse, render

CMAKE = """
absl_cc_library(
  NAME
    strings
  HDRS
    "str_cat.h"
  SRCS
    "str_cat.cc"
  COPTS
    ${ABSL_DEFAULT_COPTS}
    ${ABSL_RANDOM_RANDEN_COPTS}
  LINKOPTS
    $<$<BOOL:${MINGW}>:-ladvapi32>
  DEPS
    absl::base  # a comment
    Threads::Threads
  PUBLIC
)

absl_cc_test(
  NAME
    str_cat_test
  SRCS
    "str_cat_test.cc"
  COPTS
    ${ABSL_TEST_COPTS}
    "-DUNORDERED_SET_CXX17"
  DEPS
    absl::strings
    GTest::gmock_main
)

absl_cc_test(
  NAME
    str_split_test
  SRCS
    "str_split_test.cc"
  DEPS
    absl::strings
    GTest::gtest_main
)

absl_cc_test(
  NAME
    str_join_test
  SRCS
    "str_join_test.cc"
  DEPS
    absl::strings
    GTest::gtest_main
)

absl_cc_test(
  NAME
    own_main_test
  SRCS
    "own_main_test.cc"
  DEPS
    absl::strings
    GTest::gtest
)

absl_cc_test(
  NAME
    strings_benchmark
  SRCS
    "str_cat_benchmark.cc"
  DEPS
    absl::strings
    benchmark::benchmark_main
)
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    d = tmp_path / "absl/strings"
    d.mkdir(parents=True)
    (d / "str_cat_test.cc").write_text("TEST(StrCat, Ints) {}\nTEST_F(Shared, A) {}\n")
    (d / "str_split_test.cc").write_text("TEST(StrSplit, Basics) {}\n")
    (d / "str_join_test.cc").write_text("TEST(StrJoin, Basics) {}\n  TEST_F(Shared, B) {}\n")
    (d / "own_main_test.cc").write_text("int main() {}\n")
    return tmp_path


def test_parse_keeps_code_generation_flags_and_drops_the_rest() -> None:
    lib, *_ = parse("absl/strings", CMAKE)
    assert lib.name == "strings" and lib.sources() == ["absl/strings/str_cat.cc", "absl/strings/str_cat.h"]
    assert lib.cflags() == ["-maes", "-msse4.1"]  # the warning and MSVC variables are not ours
    assert lib.deps() == ["absl::base"]  # Threads, comments and generator expressions are gone
    assert parse("absl/strings", CMAKE)[1].cflags() == ["-DUNORDERED_SET_CXX17"]


def test_tests_share_a_binary_per_directory_unless_gtest_would_reject_them(root: Path) -> None:
    gn, binaries = render(parse("absl/strings", CMAKE), root, frozenset(), frozenset())
    # str_cat_test and str_join_test use one fixture suite name: each gets a binary of its own
    assert binaries == ["absl_own_main_test", "absl_str_cat_test", "absl_str_join_test", "absl_strings_tests"]
    group = gn[gn.index('executable("absl_strings_tests")'):]
    assert '":absl_str_split_test_test"' in group[:group.index("}")]
    assert '":gmock_main"' in group[:group.index("}")]
    own = gn[gn.index('executable("absl_own_main_test")'):]
    assert '":gmock_main"' not in own[:own.index("}")]  # it has its own main()
    assert "benchmark" not in gn
    assert gn.count('configs -= [ "//build/config/compiler:no_rtti" ]') == gn.count("source_set(") + \
        gn.count("executable(")


def test_a_named_test_that_is_not_there_is_an_error(root: Path) -> None:
    with pytest.raises(BenchError, match="no abseil test named symbolize_test"):
        render(parse("absl/strings", CMAKE), root, frozenset(), frozenset({"symbolize_test"}))
    _, binaries = render(parse("absl/strings", CMAKE), root, frozenset({"str_split_test"}), frozenset())
    assert "absl_str_split_test" in binaries
