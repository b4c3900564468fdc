"""[bench] The DTLTO benchmark runs end to end at its smallest size (no timing asserts); [dtlto] its C project,
libdeflate, linked through the distributor (locally, then its benchmark program remotely) has the code of lld's
in-process link. At -O1 (the benchmark's default is CMake Release's -O3): the optimizer is most of each compile,
and the distributor's jobs, imports and same code are tested the same at every level that imports."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.subjects import cmake_projects
from tests.integration.test_graph_support import same_code

from .bench_support import bench

pytestmark = pytest.mark.slow


def test_dtlto_smallest(tmp_path: Path) -> None:
    data = bench("dtlto", "--project", "libdeflate", "--repeat", "1", "--opt", "1", results=tmp_path, cluster=True)
    rows = {r["variant"][:3]: r for r in data["rows"]}
    assert rows["(a)"]["jobs"] == 0 and rows["(b)"]["jobs"] == rows["(b)"]["local"] > 0
    assert all(r["test"].startswith("100% tests passed") for v, r in rows.items() if v != "(d)")
    assert rows["(d)"]["test"].startswith("Compressed ")  # (d) builds only the benchmark program, run on itself
    if not data["remote_missing"]:
        assert rows["(c)"]["remote"] == rows["(c)"]["jobs"]
        # benchmark.c's index differs in every link of regular archives (lld 22 numbers its values after its
        # pid-named member files; docs/benchmarks.md): that job may execute again, the others hit
        assert rows["(d)"]["action_cache_hits"] >= rows["(d)"]["jobs"] - 1 and rows["(d)"]["fallbacks"] == 0
    # the binaries of (b)'s build directory: its local links, and (c)'s remote link of the benchmark program
    print("\n".join(same_code(Path(data["build_dir"]), Path(data["in_process_binaries"]),
                               cmake_projects.LIBDEFLATE.binaries)))
