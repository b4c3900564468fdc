"""[bench] Every benchmark runs end to end once at its smallest size, so it cannot rot (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

# Shared across runs (gitignored): the pinned ninja sdist and the ninja/mark_built tools built from it.
CACHE = REPO / "out" / "bench-cache"


def bench(name: str, *args: str, results: Path) -> dict[str, Any]:
    """Run one benchmark; return its results file, checked for the machine it ran on and its command."""
    proc = subprocess.run([sys.executable, "-m", "bench", name, *args, "--cache", str(CACHE), "--results",
                           str(results)], cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data: dict[str, Any] = json.loads((results / f"{name}.json").read_text())
    assert data["machine"]["cores"] >= 1 and data["command"].startswith(f"python -m bench {name}")
    return data


def test_scale_smallest(tmp_path: Path) -> None:
    data = bench("scale", "--sizes", "2:3", "--mix", "2:2", "--naive-max-links", "2", "--repeat", "1", results=tmp_path)
    modes = {(r["workspace"], r["mode"]) for r in data["rows"]}
    assert {("grid-2x3", "gn"), ("grid-2x3", "naive"), ("mix-2x2", "gn")} <= modes
    # every mode reached a true no-op on its marked-built directory (else the benchmark exits non-zero)
    naive = next(r for r in data["rows"] if r["mode"] == "naive" and r["workspace"] == "grid-2x3")
    assert naive["backend_edges"] == 2 * 4
    graph = next(r for r in data["ratios"] if r["mode"] == "graph" and r["workspace"] == "grid-2x3")
    assert graph["parse_per_backend_vs_naive"] > 0


def test_scale_chromium_shape_smallest(tmp_path: Path) -> None:
    data = bench("scale", "--sizes", "", "--mix", "", "--chromium", "400", "--repeat", "1", results=tmp_path)
    modes = {r["mode"] for r in data["rows"]}
    assert {"gn", "graph", "null_index"} <= modes and all(r["workspace"] == "chromium-0k" for r in data["rows"])
    default = next(r for r in data["ratios"] if r["mode"] == "null_index")
    assert default["hook_s_vs_ninja_parse_s"] > 0
    assert default["noop_vs_gn_alone"] > 0 and default["hook_rss_vs_ninja_rss"] > 0


def test_regen_smallest(tmp_path: Path) -> None:
    data = bench("regen", "--objects", "400", "--repeat", "1", "--modes", "null_index", results=tmp_path)
    edits = {r["edit"]: r for r in data["ratios"]}
    assert set(edits) == {"no change", "a test's sources", "a tool's sources", "a component library's sources"}
    assert edits["no change"]["planned"] == 0 and edits["a test's sources"]["planned"] == 1


def test_builds_smallest(tmp_path: Path) -> None:
    data = bench("builds", "--subjects", "tiny", "--variants", "abcd", "--repeat", "1", results=tmp_path)
    cases = {(b["variant"], b["case"]) for b in data["builds"]}
    variants = "abc" if data.get("remote_missing") else "abcd"
    assert cases == {(v, c) for v in variants for c in ("clean", "comment", "body", "leaf")}
    assert all("self-checks OK" in c for c in data["checks"])
    assert {r["case"] for r in data["ratios"] if r.get("c_vs_a_wall")} == {"clean", "comment", "body", "leaf"}
    assert all(b["wall_samples"] == [b["wall_s"]] for b in data["builds"])


def test_sharing_smallest(tmp_path: Path) -> None:
    rows = bench("sharing", "--workspaces", "grid:2:3", results=tmp_path)["rows"]
    thin, null = rows
    assert thin["binaries_x_objects"] == 2 * 4 == thin["backend_edges_run"]
    assert 0 < thin["compiler_runs"] <= thin["backend_edges_run"] and null["mode"] == "null_index"
    assert thin["compiler_runs_off"] == thin["backend_edges_run"]  # with the cache off every edge compiles


def test_remote_smallest(tmp_path: Path) -> None:
    data = bench("remote", "--subjects", "tiny", results=tmp_path)
    if not data["rows"]:  # no PostgreSQL here: the benchmark says so instead of inventing numbers
        assert data["missing"]
        return
    builds = {r["build"]: r for r in data["rows"]}
    assert builds["d1"]["remote_executions"] + builds["d1"]["local_fallbacks"] == builds["d1"]["actions"] > 0
    assert data["ratios"][0]["d2_cache_hit_rate"] is not None


def test_proxy_smallest(tmp_path: Path) -> None:
    data = bench("proxy", "--quick", "--subject", "tiny", "--workers", "2", results=tmp_path)
    if data.get("missing"):  # no PostgreSQL here: the benchmark says so instead of inventing numbers
        return
    for run in (data["thin_load"], data["load"]):
        assert run["lost"] == run["wrong"] == 0 and run["actions"] == 200, run
    # [lean] the second load test runs the build's client: step launchers served by the build directory's server
    assert data["load"]["client"] == "steps" and data["load"]["python_steps"] == 0
    assert 0 < data["step_server_cpu_ms_per_action"] < data["client_cpu_ms_per_action"]
    assert {r["build"] for r in data["rows"]} == {"c", "c2", "d1", "d2", "p1", "p2"}
    assert data["proxy_cpu_ms_per_action"] > 0 and set(data["goals"]) >= {"client_cpu_per_hit_proxy_vs_in_process"}


def test_dtlto_smallest(tmp_path: Path) -> None:
    data = bench("dtlto", "--project", "libdeflate", "--repeat", "1", results=tmp_path)
    rows = {r["variant"][:3]: r for r in data["rows"]}
    assert rows["(a)"]["jobs"] == 0 and rows["(b)"]["jobs"] == rows["(b)"]["local"] > 0
    assert all(r["test"].startswith("100% tests passed") for r in rows.values())
    if not data["remote_missing"]:
        assert rows["(c)"]["remote"] == rows["(c)"]["jobs"]
        # benchmark.c's index differs in every link of regular archives (lld 22 numbers its values after its
        # pid-named member files; docs/benchmarks.md): that job may execute again, the others hit
        assert rows["(d)"]["action_cache_hits"] >= rows["(d)"]["jobs"] - 1 and rows["(d)"]["fallbacks"] == 0


def test_cache_smallest(tmp_path: Path) -> None:
    data = bench("cache", "--subject", "tiny", "--entries", "500", "--repeat", "3", results=tmp_path)
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


def test_report_renders_results_into_the_doc(tmp_path: Path) -> None:
    results = tmp_path / "results"
    bench("scale", "--sizes", "2:3", "--mix", "", "--naive-max-links", "2", "--repeat", "1", results=results)
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# x\n<!-- bench:scale -->\nold\n<!-- /bench:scale -->\nkept\n")
    proc = subprocess.run([sys.executable, "-m", "bench", "report", "--results", str(results), "--doc", str(doc),
                           "--plots", str(tmp_path)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = doc.read_text()
    assert "old" not in text and "| grid-2x3 naive |" in text and text.endswith("<!-- /bench:scale -->\nkept\n")
