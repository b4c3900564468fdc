"""ninja's C++ sources (the PyPI `ninja` sdist's ninja-upstream/, bench.subjects.sdists.NINJA) and its source lists."""

from __future__ import annotations

from pathlib import Path

from bench.subjects import sdists
from bench.subjects.sdists import DEFAULT_CACHE

VERSION = sdists.NINJA.version
__all__ = ["DEFAULT_CACHE", "LIBNINJA", "NINJA_TESTS", "PERF_BINARIES", "VERSION", "fetch"]

# libninja's sources on Linux, from ninja-upstream/CMakeLists.txt (add_library(libninja …) + posix + re2c output).
LIBNINJA = (
    "build_log", "build", "clean", "clparser", "dyndep", "dyndep_parser", "debug_flags", "deps_log",
    "disk_interface", "edit_distance", "elide_middle", "eval_env", "graph", "graphviz", "jobserver", "json",
    "line_printer", "manifest_parser", "metrics", "missing_deps", "parser", "real_command_runner", "state",
    "status_printer", "string_piece_util", "util", "version", "jobserver-posix", "subprocess-posix",
    "depfile_parser", "lexer",
)
NINJA_TESTS = (
    "build_log_test", "build_test", "clean_test", "clparser_test", "depfile_parser_test", "deps_log_test",
    "disk_interface_test", "dyndep_parser_test", "edit_distance_test", "elide_middle_test", "explanations_test",
    "graph_test", "jobserver_test", "json_test", "lexer_test", "manifest_parser_test", "missing_deps_test",
    "ninja_test", "state_test", "string_piece_util_test", "subprocess_test", "test", "util_test",
)
PERF_BINARIES = (
    "build_log_perftest", "canon_perftest", "clparser_perftest", "depfile_parser_perftest",
    "elide_middle_perftest", "hash_collision_bench", "manifest_parser_perftest",
)


def fetch(cache: Path) -> Path:
    """Return CACHE/ninja-VERSION/ninja-upstream (downloaded and checked once, reused afterwards)."""
    return sdists.fetch(sdists.NINJA, cache)
