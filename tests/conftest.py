"""Test-suite policy: markers come from the folder; required tools are checked once, loudly.

tests/unit -> unit, tests/integration -> integration (clang/lld/llvm, gn, ninja), tests/remote -> remote
(PostgreSQL + BuildGrid). In CI (CI=true) a missing tool stops the run with one clear line; elsewhere the
tests that need it are skipped with that line as the reason (shown by -ra), never silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings

from goma_ext.worker.cli import DEFAULT_RUNNER
from tests import budget, durations, run_shared
from tests.builds import (  # noqa: F401 (re-exported: the helpers of every folder import them from here)
    EXAMPLE_ROOT,
    REPO,
    Build,
    build_example_tree,
    copy_build_dir,
    copy_example_tree,
    copy_without_backends,
    example_command_tree,
    example_in_process_tree,
    example_stdout,
    example_tree_in,
    forget_backends,
)
from tests.system_users import remove_user, user_exists

LLVM_VERSIONS = (19, 22)
RUNNER_BEFORE = pytest.StashKey[bool]()  # whether the action runner user existed when the run started

REQUIRED_TOOLS: dict[str, tuple[str, ...]] = {
    "integration": (
        "clang-19", "clang++-19", "ld.lld-19", "llvm-ar-19", "llvm-bcanalyzer-19", "llvm-objdump-19",
        "clang-22", "ld.lld-22", "llvm-bcanalyzer-22", "gn", "ninja", "strace", "cmake", "chromium",
    ),
    "remote": (
        "clang-19", "clang-22", "gn", "ninja", "ld.lld-19", "ld.lld-22", "openssl", "pg_ctlcluster", "bwrap", "unshare",
        "ip",
    ),
}


# Hypothesis tests without their own @settings: 100 examples with --full, a fifth otherwise (tests/budget.py).
settings.register_profile("full", max_examples=100, deadline=None)
settings.register_profile("ci", max_examples=budget.share(100), deadline=None)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help="run every randomized test with its full count of cases (tests/budget.py)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("full"):
        os.environ[budget.FULL_ENV] = "1"
    settings.load_profile("full" if budget.full() else "ci")


def pytest_sessionstart(session: pytest.Session) -> None:
    # in the run's own process (pytest-xdist's controller, or the one process without it), not in each worker:
    # before the workers start, so that they inherit the run's shared directory
    if not hasattr(session.config, "workerinput"):
        session.config.stash[RUNNER_BEFORE] = user_exists(DEFAULT_RUNNER)
        run_shared.begin()


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """What the run's processes shared (the run's cluster, the example's build) is undone when every worker has
    finished. Then the action runner user `goma-ext cluster start` makes as root when it is missing (the
    benchmarks' and the guide's clusters, which run as they would for a user) is removed again when the suite
    made it: by now every cluster of the run has stopped."""
    if hasattr(session.config, "workerinput"):
        return
    run_shared.end_all()
    if os.geteuid() == 0 and session.config.stash.get(RUNNER_BEFORE, True) is False and user_exists(DEFAULT_RUNNER):
        remove_user(DEFAULT_RUNNER)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        kind = Path(str(item.fspath)).relative_to(REPO / "tests").parts[0]
        if kind in ("unit", "integration", "remote"):
            item.add_marker(getattr(pytest.mark, kind))
    longest_files_first(items)
    needed = {m for item in items for m in REQUIRED_TOOLS if item.get_closest_marker(m)}
    for marker in sorted(needed):
        missing = [t for t in REQUIRED_TOOLS[marker] if shutil.which(t) is None]
        if not missing:
            continue
        reason = f"{marker} tests need {', '.join(missing)}, not on PATH (./dev test installs them)"
        if os.environ.get("CI"):
            pytest.exit(f"CI: {reason}", returncode=3)
        for item in items:
            if item.get_closest_marker(marker):
                item.add_marker(pytest.mark.skip(reason=reason))


def longest_files_first(items: list[pytest.Item]) -> None:
    """Sort the test files by their recorded time (tests/durations.json), longest first, keeping the order inside
    each file. pytest-xdist (--dist loadfile, as `./dev test` runs) hands files to workers in this order, so the
    long ones start early and short ones fill the end."""
    seconds = durations.load()
    items.sort(key=lambda item: -seconds.get(Path(str(item.fspath)).relative_to(REPO).as_posix(), 0.0))


@pytest.fixture(scope="session", autouse=True)
def proxy_state_dir() -> Iterator[Path]:
    """The session's own goma-ext proxy state directory (short: socket paths are limited to 107 bytes);
    every proxy a test started through `goma-ext run` is stopped at the end. One proxy per endpoint unless a test
    asks for shards (GOMA_EXT_PROXY_SHARDS): the default depends on the machine's cores."""
    directory = Path(tempfile.mkdtemp(prefix="gxp-"))
    old = {name: os.environ.get(name) for name in ("GOMA_EXT_PROXY_DIR", "GOMA_EXT_PROXY_SHARDS")}
    os.environ.update(GOMA_EXT_PROXY_DIR=str(directory), GOMA_EXT_PROXY_SHARDS="1")
    try:
        yield directory
    finally:
        subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "stop"], capture_output=True, timeout=120,
                       check=False)
        for name, value in old.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(directory, ignore_errors=True)


SESSION_MARK = "GN_THINLTO_TEST_SESSION"  # in the environment of every process the suite starts


def step_server_pids(cwd: Path | None = None) -> list[int]:
    """The step servers (gn_thinlto/steps/step_server.py) this test session started, those serving the build
    directory CWD when given."""
    mark = f"{SESSION_MARK}={os.environ.get(SESSION_MARK, '')}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"step_server.py" not in (proc / "cmdline").read_bytes():
                continue
            if mark not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if cwd is not None and os.readlink(proc / "cwd") != str(cwd):
                continue
        except OSError:
            continue
        pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="session", autouse=True)
def step_servers() -> Iterator[None]:
    """Every step server a test's build started (they leave by themselves when idle) is stopped at the end."""
    old = os.environ.get(SESSION_MARK)
    os.environ[SESSION_MARK] = f"{os.getpid()}-{os.urandom(4).hex()}"
    try:
        yield
    finally:
        for pid in step_server_pids():
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        if old is None:
            del os.environ[SESSION_MARK]
        else:
            os.environ[SESSION_MARK] = old


@pytest.fixture(scope="session")
def example_tree() -> Build:
    """The example built by `gn-thinlto example` (the graph, the default settings), once per run (for every
    pytest-xdist worker: tests/run_shared.py), laid out as in the checkout (`example_command_tree`). Tests take
    copies (`copy_example_tree`), never this one."""
    return example_tree_in(run_shared.once("example-tree", example_command_tree))


@pytest.fixture(scope="session")
def example_in_process(example_tree: Build) -> Build:
    """`example_tree` switched to in-process ThinLTO by `gn-thinlto example --in-process`, once per run: what the
    graph's binaries are compared with. Tests read it or take copies, never change it."""
    return example_tree_in(run_shared.once("example-in-process", lambda d: example_in_process_tree(example_tree, d)))


# Debug fission (-gsplit-dwarf on the link line): the example's arguments, and what its shared build builds (an
# executable, one that loads a shared library, and the library)
FISSION_ARGS = "symbol_level=2 use_debug_fission=true"
FISSION_TARGETS = ("calc", "archiver", "libcodec.so")


# The regular-LTO module in 3 partitions: CFI without whole-program devirtualization, a regular-LTO module without
# branch funnels, which LLVM can split; and the binaries built with it
PARTITION_ARGS = "use_whole_program_vtables=false lto_partitions=3"
PARTITION_TARGETS = ("calc", "codec_unittests")


def _shared_example(name: str, args: str, targets: tuple[str, ...]) -> Build:
    """The example with ARGS, TARGETS built through the graph, once per run (tests/run_shared.py), laid out as
    `build_example_tree` lays it out. Tests read it or take copies (`copy_example_tree`), never change it."""

    def make(dest: Path) -> None:
        build_example_tree(dest, f"--args={args}", targets=targets)

    return example_tree_in(run_shared.once(name, make))


@pytest.fixture(scope="session")
def example_fission() -> Build:
    """The example with debug fission (FISSION_ARGS), FISSION_TARGETS (`_shared_example`). Its compile units'
    DW_AT_comp_dir is its build directory. For test_graph_fission.py and test_example_remote.py's split-DWARF test
    (which compiled calc again on its own)."""
    return _shared_example("example-fission", FISSION_ARGS, FISSION_TARGETS)


@pytest.fixture(scope="session")
def example_partitions() -> Build:
    """The example with its regular-LTO module in partitions (PARTITION_ARGS), PARTITION_TARGETS
    (`_shared_example`): for test_graph_partitions.py and test_partitions_remote.py, which compiled it each."""
    return _shared_example("example-partitions", PARTITION_ARGS, PARTITION_TARGETS)


@dataclass(frozen=True)
class Llvm:
    """Paths of one installed LLVM toolchain (Debian's /usr/lib/llvm-N)."""

    version: int

    @property
    def bin(self) -> Path:
        return Path(f"/usr/lib/llvm-{self.version}/bin")

    def tool(self, name: str) -> str:
        return str(self.bin / name)


@pytest.fixture(params=LLVM_VERSIONS, ids=[f"llvm{v}" for v in LLVM_VERSIONS])
def llvm(request: pytest.FixtureRequest) -> Llvm:
    """Each LLVM version of the test matrix, for tests that must hold on all of them."""
    return Llvm(request.param)


@pytest.fixture
def llvm19() -> Llvm:
    return Llvm(19)
