"""Where the suite's CPU goes: a pytest plugin that puts each test, and every process it starts (servers and
daemons included, which outlive it and which `time` does not see), in a cgroup of its own (cgroup v1 `cpuacct`,
as root), and a report of CPU seconds per file.

    ./dev test -p tests.cpu_accounting                  # writes .state/cpu/cpu-PID.json per pytest process
    .venv/bin/python -m tests.cpu_accounting .state/cpu # CPU per file, largest first

A daemon's CPU counts for the test that started it (the session cluster's for the first test that asked for it),
also after that test ended, until its pytest process ends. The wall time of a test on a busy machine says little of its
cost; its CPU seconds say what it takes from the other tests."""

from __future__ import annotations

import collections
import json
import os
import sys
import time
import uuid
from collections.abc import Generator
from pathlib import Path

import pytest

CPUACCT = Path("/sys/fs/cgroup/cpuacct")
# GN_THINLTO_CPU_OUT: another directory, for runs made side by side
OUT = Path(os.environ.get("GN_THINLTO_CPU_OUT") or Path(__file__).resolve().parent.parent / ".state" / "cpu")
_run = os.environ.setdefault("GN_THINLTO_CPU_RUN", uuid.uuid4().hex[:8])  # one name per run, its workers inherit it
_tests: dict[str, tuple[Path, float]] = {}


def _usage(group: Path) -> float:
    try:
        return int((group / "cpuacct.usage").read_text()) / 1e9
    except OSError:
        return 0.0


def _enter(group: Path) -> None:
    group.mkdir(parents=True, exist_ok=True)
    (group / "cgroup.procs").write_text(str(os.getpid()))


def pytest_configure(config: pytest.Config) -> None:
    if not CPUACCT.is_dir() or os.geteuid() != 0:
        raise pytest.UsageError(f"tests.cpu_accounting needs root and cgroup v1 cpuacct at {CPUACCT}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    group = CPUACCT / f"gnt-{_run}" / uuid.uuid4().hex[:12]
    _enter(group)
    start = time.monotonic()
    yield
    _enter(CPUACCT / f"gnt-{_run}" / f"between-{os.getpid()}")
    _tests[item.nodeid] = (group, time.monotonic() - start)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _tests:  # pytest-xdist's controller runs no test
        return
    OUT.mkdir(parents=True, exist_ok=True)
    rows = {n: {"cpu_s": _usage(g), "wall_s": w} for n, (g, w) in _tests.items()}
    (OUT / f"cpu-{os.getpid()}.json").write_text(json.dumps(rows, indent=1))
    (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))  # back to the root group, so that its own can go
    groups = [*(g for g, _ in _tests.values()), CPUACCT / f"gnt-{_run}" / f"between-{os.getpid()}"]
    for group in [*groups, CPUACCT / f"gnt-{_run}"]:
        try:
            group.rmdir()  # an empty cgroup goes; one a daemon still runs in stays until the machine restarts
        except OSError:
            pass


def report(directory: Path) -> list[str]:
    cpu: collections.Counter[str] = collections.Counter()
    for path in directory.glob("cpu-*.json"):
        for nodeid, row in json.loads(path.read_text()).items():
            cpu[nodeid.split("::")[0]] += row["cpu_s"]
    lines = [f"{'CPU s':>8}  file", *(f"{s:8.1f}  {f}" for f, s in cpu.most_common())]
    return [*lines, f"{sum(cpu.values()):8.1f}  in all"]


if __name__ == "__main__":
    print("\n".join(report(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)))
