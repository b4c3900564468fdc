"""[bench] Every benchmark runs end to end once at its smallest size, so it cannot rot (no timing asserts). The
long ones have files of their own (test_bench_*.py), so that they run beside each other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

from .bench_support import CACHE, bench

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def scale_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One smallest scale run (its results directory and results) for the scale test and the report's."""
    results = tmp_path_factory.mktemp("scale-results")
    return results, bench("scale", "--sizes", "2:3", "--mix", "2:2", "--naive-max-links", "2", "--repeat", "1",
                          results=results)


def test_scale_smallest(scale_results: tuple[Path, dict[str, Any]]) -> None:
    _, data = scale_results
    modes = {(r["workspace"], r["mode"]) for r in data["rows"]}
    assert {("grid-2x3", "gn"), ("grid-2x3", "naive"), ("mix-2x2", "gn")} <= modes
    # every mode reached a true no-op on its marked-built directory (else the benchmark exits non-zero)
    naive = next(r for r in data["rows"] if r["mode"] == "naive" and r["workspace"] == "grid-2x3")
    assert naive["backend_edges"] == 2 * 4
    graph = next(r for r in data["ratios"] if r["mode"] == "graph" and r["workspace"] == "grid-2x3")
    assert graph["parse_per_backend_vs_naive"] > 0


def test_scale_chromium_shape_smallest(tmp_path: Path) -> None:
    # 200 objects still make every kind of link (products, big and small tests, shared libraries, tools: 10); the
    # naive baseline of two links, as above (its default 20 named every one of the 10 links' objects on each of
    # their backend edges: 13 MB at 400 objects). mark_built creates every output: ~12,000 files at 400 objects.
    data = bench("scale", "--sizes", "", "--mix", "", "--chromium", "200", "--naive-max-links", "2", "--repeat", "1",
                 results=tmp_path)
    modes = {r["mode"] for r in data["rows"]}
    assert {"gn", "graph", "null_index"} <= modes and all(r["workspace"] == "chromium-0k" for r in data["rows"])
    default = next(r for r in data["ratios"] if r["mode"] == "null_index")
    assert default["hook_s_vs_ninja_parse_s"] > 0
    assert default["noop_vs_gn_alone"] > 0 and default["hook_rss_vs_ninja_rss"] > 0


def test_regen_smallest(tmp_path: Path) -> None:
    data = bench("regen", "--objects", "200", "--repeat", "1", "--modes", "null_index", results=tmp_path)
    edits = {r["edit"]: r for r in data["ratios"]}
    assert set(edits) == {"no change", "a test's sources", "a tool's sources", "a component library's sources"}
    assert edits["no change"]["planned"] == 0 and edits["a test's sources"]["planned"] == 1


def test_sharing_smallest(tmp_path: Path) -> None:
    rows = bench("sharing", "--workspaces", "grid:2:1", results=tmp_path)["rows"]
    thin, null = rows
    assert thin["binaries_x_objects"] == 2 * 2 == thin["backend_edges_run"]
    assert 0 < thin["compiler_runs"] <= thin["backend_edges_run"] and null["mode"] == "null_index"
    assert thin["compiler_runs_off"] == thin["backend_edges_run"]  # with the cache off every edge compiles


def test_grpc_calls_smallest(tmp_path: Path) -> None:
    """[scale] one round of each client (Python's sync API, grpc.aio, gRPC C++, compiled here) against one echo
    server: every call answered, a CPU figure for each."""
    data = bench("grpc-calls", "--calls", "200", "--concurrency", "8", "--rounds", "1", results=tmp_path)
    assert set(data["rounds"]) == {"sync", "aio", "c++"} and all(len(r) == 1 for r in data["rounds"].values())
    assert all(m["cpu_ms_per_call"] > 0 and m["calls_per_s"] > 0 for m in data["medians"].values())
    assert data["native_vs_sync_cpu"] > 0


def test_cache_smallest(tmp_path: Path) -> None:
    data = bench("cache", "--subject", "micro", "--entries", "500", "--repeat", "3", results=tmp_path)
    assert data["hits"]["entries"] > 0 and data["hits"]["verified_vs_unverified"] > 0
    assert data["prune"]["entries"] == 500 and data["prune"]["entries_removed"] == 50
    shared = data["shared"]
    assert shared["distinct_backends"] > 0 and shared["compiler_runs"] >= shared["distinct_backends"]
    assert all("self-checks OK" in c for c in shared["checks"])


def test_ninja_code_base_generates(tmp_path: Path) -> None:
    """The pinned sdist is fetched and checked, and the GN files for ninja's sources generate a full graph."""
    sys.path.insert(0, str(REPO))
    from bench.subjects import ninja_workspace

    root = ninja_workspace.prepare(CACHE)
    out = tmp_path / "out"
    subprocess.run(["gn", "gen", str(out), f"--root={root}", f"--args={ninja_workspace.GN_ARGS}"], check=True,
                   capture_output=True)
    targets = subprocess.run(["ninja", "-C", str(out), "-t", "targets", "all"], capture_output=True, text=True,
                             check=True).stdout
    for binary in ninja_workspace.BINARIES:
        assert f"\n{binary}: link" in "\n" + targets, binary


def test_report_renders_results_into_the_doc(scale_results: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    results, _ = scale_results
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# x\n<!-- bench:scale -->\nold\n<!-- /bench:scale -->\nkept\n")
    proc = subprocess.run([sys.executable, "-m", "bench", "report", "--results", str(results), "--doc", str(doc),
                           "--plots", str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = doc.read_text()
    assert "old" not in text and "| grid-2x3 naive |" in text and text.endswith("<!-- /bench:scale -->\nkept\n")
