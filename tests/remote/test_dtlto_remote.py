"""`goma-ext dtlto --remote=…`: a clang-22 link's backends on the real cluster, then from the action cache in a
fresh build directory; lld's job file and the decoded index must agree on every input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from goma_ext.remote import stats
from tests.dtlto_program import EXPECTED_OUTPUT, OBJECTS_ONLY, build, keeper, link, records, run
from tests.remote.conftest import INSTANCE, Cluster


def _remote(cluster: Cluster) -> tuple[str, ...]:
    return ("--no-cache", f"--remote={cluster.endpoint}", f"--instance={INSTANCE}")


def _env(salt: str) -> dict[str, str]:
    return {**os.environ, "GOMA_EXT_CACHE_SALT": salt}


def _proxy_runs(cluster: Cluster) -> int:
    """Actions the session's proxy for the cluster's endpoint has run so far (0 before it exists)."""
    out = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "status", "--json"], capture_output=True,
                         text=True, check=True).stdout
    return sum(int(p.get("runs", 0)) for p in json.loads(out) if p["endpoint"] == cluster.endpoint)


def test_remote_link_equals_local_then_a_fresh_directory_executes_nothing(
    cluster: Cluster, tmp_path: Path, salt: str
) -> None:
    local, remote, fresh = (build(tmp_path / d) for d in ("local", "remote", "fresh"))
    done = link(local, dist=("--no-cache",), inputs=OBJECTS_ONLY)
    assert done.returncode == 0, done.stderr
    before = _proxy_runs(cluster)
    done = link(remote, dist=_remote(cluster), inputs=OBJECTS_ONLY, env=_env(salt))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [r.mode for r in records(remote)] == [stats.Mode.REMOTE] * 3
    assert (remote / "app").read_bytes() == (local / "app").read_bytes()
    assert _proxy_runs(cluster) == before + 3  # [proxy] the jobs went through the user's proxy for the endpoint
    # ...and without a proxy (GOMA_EXT_PROXY=off) the distributor's own in-process client serves the same actions
    done = link(fresh, dist=_remote(cluster), inputs=OBJECTS_ONLY, env={**_env(salt), "GOMA_EXT_PROXY": "off"})
    assert done.returncode == 0, done.stderr
    assert _proxy_runs(cluster) == before + 3
    summary = stats.summarize(records(fresh))
    assert (summary["remote_executions"], summary["cache_hits"], summary["bytes_uploaded"]) == (0, 3, 0)
    assert (fresh / "app").read_bytes() == (local / "app").read_bytes()
    assert run(["./app"], fresh).stdout == EXPECTED_OUTPUT
    assert not (fresh / ".goma-ext-dtlto").exists() or not any((fresh / ".goma-ext-dtlto").glob("*/*.o"))


def test_archive_members_are_the_same_action_in_every_link(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    """lld extracts liblib.a's member to a file named after its pid, and the index names it; staged under its
    content's name with a renamed index, its job and its importers are still served by the action cache in a
    fresh directory, and the binary is the local link's."""
    local, work, fresh = (build(tmp_path / d) for d in ("local", "ws", "fresh"))
    assert link(local, dist=("--no-cache",)).returncode == 0
    done = link(work, dist=_remote(cluster), env=_env(salt))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [r.mode for r in records(work)] == [stats.Mode.REMOTE] * 3
    done = link(fresh, dist=_remote(cluster), env=_env(salt))
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [r.mode for r in records(fresh)] == [stats.Mode.CACHE_HIT] * 3
    for d in (work, fresh):
        assert (d / "app").read_bytes() == (local / "app").read_bytes()
        assert run(["./app"], d).stdout == EXPECTED_OUTPUT
        assert not [p for p in (d / ".goma-ext-dtlto").rglob("*") if p.is_file() and p.name != ".lock"]


def test_job_file_disagreeing_with_the_index_is_an_error_naming_both(
    cluster: Cluster, tmp_path: Path, salt: str
) -> None:
    work = build(tmp_path / "ws")
    drop_import = "job = next(j for j in doc['jobs'] if j['args'][0] == 'main.o')\njob['inputs'].remove('util.o')"
    done = link(work, dist=_remote(cluster), env=_env(salt), inputs=OBJECTS_ONLY,
                distributor=keeper(work, drop_import))
    assert done.returncode != 0
    line = next(x for x in done.stderr.splitlines() if x.startswith("goma-ext: error:"))
    assert "the inputs of the job for main.o disagree with its index main." in line, done.stderr
    assert "only in the index: ['util.o']" in line and ".dist-file.json" in line
    assert not (work / "app").exists()


def test_absolute_paths_compile_locally_with_one_warning(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    """A link line with absolute paths makes lld's job file absolute: not a remote action (it would be machine-
    specific), so every job falls back to a local compile, with one warning."""
    work = build(tmp_path / "ws")
    done = link(work, dist=_remote(cluster), env=_env(salt), inputs=[str(work / o) for o in OBJECTS_ONLY])
    assert done.returncode == 0, done.stderr
    warnings = done.stderr.splitlines()
    assert len(warnings) == 1 and "absolute path" in warnings[0] and "compiling locally" in warnings[0], warnings
    assert [r.mode for r in records(work)] == [stats.Mode.FALLBACK] * 3
    assert run(["./app"], work).stdout == EXPECTED_OUTPUT
