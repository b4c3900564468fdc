"""bench/registry.py is the one list `python -m bench`, `bench all` and `bench report` read: every benchmark has a
module with main(), every run names a benchmark and a renderer the report has, and docs/benchmarks.md has a block
for exactly the runs that render one."""

from __future__ import annotations

import importlib
import re

import pytest

from bench import all_bench, registry, report
from bench.__main__ import main as bench_main
from tests.conftest import REPO


def test_every_benchmark_has_a_main_and_every_run_a_benchmark_and_a_renderer() -> None:
    names = [b.name for b in registry.BENCHMARKS]
    assert len(names) == len(set(names))
    for b in registry.BENCHMARKS:
        assert callable(importlib.import_module(b.module).main), b
    runs = [r.name for r in registry.RUNS]
    assert len(runs) == len(set(runs))
    for r in registry.RUNS:
        assert r.benchmark in names, r
        assert r.renders_as is None or r.renders_as in report.RENDERERS, r


def test_the_report_blocks_in_the_doc_are_the_runs_that_render() -> None:
    doc = (REPO / "docs" / "benchmarks.md").read_text()
    blocks = set(re.findall(r"<!-- bench:([\w-]+) -->", doc))
    assert blocks == {r.name for r in registry.RUNS if r.renders_as} | {"goals"}


def test_bench_all_runs_the_registry_in_order_and_refuses_an_unknown_step(capsys) -> None:
    quick = [r.name for r in registry.in_all(True)]
    full = [r.name for r in registry.in_all(False)]
    assert quick == [r.name for r in registry.RUNS if r.quick is not None]
    assert "scale-large" in full and "scale-large" not in quick
    with pytest.raises(SystemExit) as e:
        all_bench.main(["--quick", "--only", "builds-abseil", "--no-report"])
    assert e.value.code == 2
    assert "builds-abseil not in `bench all --quick`" in capsys.readouterr().err


def test_an_unknown_benchmark_lists_the_registry(capsys) -> None:
    assert bench_main(["nonesuch"]) == 2
    err = capsys.readouterr().err
    assert all(b.name in err for b in registry.BENCHMARKS)
