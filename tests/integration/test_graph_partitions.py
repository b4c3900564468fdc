"""[partition] The regular-LTO module compiled by partition edges, on the example built for real: every function
of in-process lld with the same --lto-partitions=3; an edit outside the module reruns no partition; a module
with whole-program devirtualization's branch funnels is split too, and its binary runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gn_thinlto.analysis.parity import compare_builds
from tests.conftest import PARTITION_ARGS, PARTITION_TARGETS

from ..builds import Build, copy_example_tree, gen_and_build
from .test_graph_support import relinked_in_process


@pytest.fixture(scope="module")
def graph(example_partitions: Build, tmp_path_factory: pytest.TempPathFactory) -> Build:
    """A copy of the run's build of the example in partitions (`example_partitions`), which this file's tests edit."""
    return copy_example_tree(example_partitions, tmp_path_factory.mktemp("partitions"))


@pytest.fixture(scope="module")
def in_process(graph: Build) -> Build:
    """The graph's compiles linked by lld in-process (a copy of its build directory, GN's own graph)."""
    return relinked_in_process(graph, graph.out.parent / "inproc", PARTITION_ARGS, PARTITION_TARGETS)


def _record(b: Build, target: str) -> dict[str, object]:
    return json.loads((b.out / f"gn-thinlto/{target}/lto/partitions.json").read_text())


def test_partitions_are_compiled_by_their_edges_as_lld_compiles_them(graph: Build, in_process: Build) -> None:
    record = _record(graph, "calc")
    assert record["partitions"] == 3 and record["why"] == "fixed: 3"
    objects = [graph.out / f"gn-thinlto/calc/lto/part{k}.o" for k in range(3)]
    assert all(o.stat().st_size > 0 for o in objects)
    rsp = (graph.out / "gn-thinlto/calc/final.rsp").read_text().split()
    assert [line for line in rsp if "/lto/" in line] == [f"gn-thinlto/calc/lto/part{k}.o" for k in range(3)]
    assert (graph.out / "gn-thinlto/calc/lto.split.o").stat().st_size == 0  # lld compiled nothing itself
    results = compare_builds(in_process.out, graph.out)
    assert {r.name for r in results} >= {"calc", "codec_unittests"}
    assert all(r.at_parity for r in results), "\n".join(r.line() for r in results)
    assert graph.run_binary("calc")


def test_an_edit_outside_the_regular_lto_module_reruns_no_partition(graph: Build) -> None:
    source = graph.root / "base/math/gcd.cc"
    text = source.read_text()
    assert "return" in text
    before = len(graph.log_entries())
    source.write_text(text.replace("return", "return 0 +", 1))
    try:
        graph.ninja(*PARTITION_TARGETS)
        ran = graph.ran_since(before)
    finally:
        source.write_text(text)
    assert any(r.endswith("calc/used.txt") for r in ran), ran  # the thin link ran again
    assert [r for r in ran if "/lto/part" in r and r.endswith(".bc")], ran  # the thin link's outputs, unchanged
    assert not [r for r in ran if "/lto/part" in r and r.endswith(".o")], ran  # so restat skipped every edge


def test_a_lost_partition_object_comes_back_from_the_backend_cache(graph: Build) -> None:
    parts = [graph.out / f"gn-thinlto/calc/lto/part{k}.o" for k in range(3)]
    want = [p.read_bytes() for p in parts]
    log = graph.out / "gn-thinlto/backend.log"
    before = len(log.read_text().splitlines())
    for p in parts:
        p.unlink()
    graph.ninja("calc")
    events = [line.split(" ") for line in log.read_text().splitlines()[before:]]
    # (an earlier test's restored source may bring its own backend's hit along)
    assert sorted((e[0], e[2]) for e in events if "/lto/" in e[2]) == [
        ("hit", str(p.relative_to(graph.out))) for p in parts]
    assert not [e for e in events if e[0] != "hit"], events
    assert [p.read_bytes() for p in parts] == want


def test_branch_funnels_go_with_their_vtables(example_tree: Build, tmp_path: Path) -> None:
    """Whole-program devirtualization's branch funnels (in-process lld aborts on them with --lto-partitions=3):
    moved into their vtables' partition, every partition compiles and the binary runs. (A copy of the session's
    build of the example, whose compiles are the default args' and lto_partitions a link flag: calc's links run.)"""
    b = copy_example_tree(example_tree, tmp_path)
    before = len(b.log_entries())
    gen_and_build(b.root, b.out, "--args=lto_partitions=3", targets=("calc",))
    parts = [f"gn-thinlto/calc/lto/part{k}.o" for k in range(3)]
    ran = b.ran_since(before)
    assert not [o for o in ran if o.startswith("obj/")], ran  # nothing compiled again
    assert sorted(o for o in ran if "/lto/part" in o and o.endswith(".o")) == parts, ran  # this build's partitions
    record = _record(b, "calc")
    assert record["partitions"] == 3 and str(record["why"]).endswith("branch funnels placed with their vtables")
    assert all((b.out / part).stat().st_size > 0 for part in parts)
    assert b.run_binary("calc")
