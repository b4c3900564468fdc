"""Seconds per test file from a whole run, for scheduling (tests/conftest.py runs the longest files first, so that
under pytest-xdist no long file starts last). Refresh after adding or speeding up a slow file:

    ./dev test --junitxml=/tmp/suite.xml && .venv/bin/python -m tests.durations /tmp/suite.xml

A file missing from tests/durations.json runs after the recorded ones; nothing else depends on the numbers.
`--report JUNIT_XML` prints the per-folder table instead (summed test time per folder, and the run's wall)."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

DURATIONS = Path(__file__).resolve().parent / "durations.json"


def per_file(junit_xml: Path) -> dict[str, float]:
    """tests/… file -> the sum of its test cases' times (setup, call and teardown) in a JUnit XML report."""
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # pytest names a case's class `tests.unit.test_x` or `tests.unit.test_x.TestClass`
        while module and not module[-1].startswith("test_"):
            module.pop()
        if module:
            seconds["/".join(module) + ".py"] += float(case.get("time", 0))
    return dict(seconds)


def load() -> dict[str, float]:
    return json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}


def per_folder(seconds: dict[str, float]) -> dict[str, tuple[int, float]]:
    """tests/unit, tests/integration, tests/remote -> (files, summed seconds)."""
    folders: dict[str, tuple[int, float]] = {}
    for name, s in seconds.items():
        folder = name.rsplit("/", 1)[0]
        files, total = folders.get(folder, (0, 0.0))
        folders[folder] = (files + 1, total + s)
    return folders


def report(junit_xml: Path) -> str:
    """A Markdown table: per folder, its files' summed test time (what it costs serially), and the run's wall."""
    root = ET.parse(junit_xml).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    rows = ["| folder | files | tests' summed time |", "|---|---:|---:|"]
    folders = per_folder(per_file(junit_xml))
    for folder, (files, total) in sorted(folders.items()):
        rows.append(f"| {folder} | {files} | {total / 60:.1f} min |")
    rows.append(f"| all | {sum(f for f, _ in folders.values())} | {sum(t for _, t in folders.values()) / 60:.1f} min |")
    rows.append(f"\n{suite.get('tests')} tests, {suite.get('failures')} failed, {suite.get('errors')} errors, "
                f"{suite.get('skipped')} skipped; pytest's own wall time {float(suite.get('time', 0)) / 60:.1f} min")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--report"] and len(argv) == 2:
        print(report(Path(argv[1])))
        return 0
    if len(argv) != 1:
        print("usage: python -m tests.durations [--report] JUNIT_XML", file=sys.stderr)
        return 2
    seconds = per_file(Path(argv[0]))
    ordered = {name: round(s, 1) for name, s in sorted(seconds.items(), key=lambda kv: (-kv[1], kv[0]))}
    DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n")
    print(f"{DURATIONS}: {len(ordered)} files, {sum(seconds.values()) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
