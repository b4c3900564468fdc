"""Fetch ninja's C++ sources once: the PyPI `ninja` sdist (pinned version and sha256) carries them in ninja-upstream/."""

from __future__ import annotations

import hashlib
import shutil
import sys
import tarfile
from pathlib import Path

from bench.measure import BenchError, run

VERSION = "1.13.0"
SHA256 = "4a40ce995ded54d9dc24f8ea37ff3bf62ad192b547f6c7126e7e25045e76f978"
SDIST = f"ninja-{VERSION}.tar.gz"
DEFAULT_CACHE = Path.home() / ".cache" / "gn-thinlto-bench"

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


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(cache: Path) -> Path:
    """Return CACHE/ninja-VERSION/ninja-upstream (downloaded and checked once, reused afterwards)."""
    upstream = cache / f"ninja-{VERSION}" / "ninja-upstream"
    if (upstream / "src" / "ninja.cc").is_file():
        return upstream
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / SDIST
    if not tarball.is_file():
        run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", "ninja", "--no-deps",
             f"ninja=={VERSION}", "-d", str(cache)])
    got = sha256(tarball)
    if got != SHA256:
        tarball.unlink()
        raise BenchError(f"{tarball}: sha256 {got}, expected {SHA256} (deleted; run again)")
    tmp = cache / f"ninja-{VERSION}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    with tarfile.open(tarball) as tar:
        _extract(tar, tmp)
    shutil.rmtree(cache / f"ninja-{VERSION}", ignore_errors=True)
    (tmp / f"ninja-{VERSION}").rename(cache / f"ninja-{VERSION}")
    tmp.rmdir()
    return upstream


def _extract(tar: tarfile.TarFile, dest: Path) -> None:
    """Extract only regular files and directories inside DEST (the sha256 is pinned; this is belt and braces).

    tarfile's extraction filters need Python 3.11.4; Debian 12 ships 3.11.2, so the check is done here.
    """
    for member in tar.getmembers():
        parts = Path(member.name).parts
        if member.name.startswith("/") or ".." in parts or not (member.isfile() or member.isdir()):
            raise BenchError(f"{tar.name}: unexpected member {member.name!r} (absolute, outside, or not a file)")
    tar.extractall(dest)  # every member checked above
