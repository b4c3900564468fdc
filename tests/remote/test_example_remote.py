"""The bundled example built with `gn-thinlto gen --remote`: every backend the local content cache does not
already hold runs remotely through `goma-ext run`; thin links and final links stay local. Checks: every
native object equals a local build's, every binary self-checks, and a second build in a fresh directory is
served entirely from the action cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from goma_ext.remote import stats
from tests.conftest import EXAMPLE_ROOT
from tests.remote.conftest import INSTANCE, Cluster

JOBS = "6"


def _gen(out: Path, endpoint: str | None) -> None:
    remote = ["--remote", endpoint] if endpoint else []
    subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(EXAMPLE_ROOT), *remote],
                   check=True, capture_output=True, env={**os.environ, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE})


def _ninja(out: Path, salt: str) -> None:
    env = {**os.environ, "GOMA_EXT_CACHE_SALT": salt}
    proc = subprocess.run(["ninja", "-C", str(out), "-j", JOBS], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "goma-ext: warning" not in proc.stdout, proc.stdout[-3000:]


def _natives(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "gn-thinlto").glob("*/native/**/*.o"))}


@pytest.mark.slow
def test_example_builds_remotely_byte_identical_then_from_the_cache(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    cluster.ensure_server()
    local, remote, fresh = tmp_path / "local", tmp_path / "remote", tmp_path / "fresh"
    _gen(local, None)
    _ninja(local, salt)
    _gen(remote, cluster.endpoint)
    _ninja(remote, salt)

    summary = stats.report(remote)
    assert summary["runs"] > 100 and summary["remote_executions"] == summary["runs"], summary
    assert summary["naive_upload_bytes"] > summary["input_bytes"] >= summary["bytes_uploaded"]
    want, got = _natives(local), _natives(remote)
    # Backends the local content cache already held (identical jobs of other binaries) never reach the wrapper.
    assert len(got) > summary["runs"] and sorted(got) == sorted(want)
    assert [name for name in want if got[name] != want[name]] == []

    from gn_thinlto.cli import tools
    from gn_thinlto.cli.example import run_self_checks

    binaries = tools.gn_ls(remote, EXAMPLE_ROOT, "--type=executable", "--as=output")
    assert binaries and [c for c in run_self_checks(remote, binaries) if not c.ok] == []

    _gen(fresh, cluster.endpoint)
    _ninja(fresh, salt)
    again = stats.report(fresh)
    assert again["remote_executions"] == 0 and again["cache_hits"] == again["runs"] == summary["runs"], again
    assert again["bytes_uploaded"] == 0
    assert _natives(fresh) == got
    print(f"remote build: {summary}\nfresh build: {again}")
    # [trace] the backend slices of each build say how their misses ran and what they uploaded
    for out, how in ((remote, "remote"), (fresh, "cache_hit")):
        proc = subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "trace", str(out), "-o", str(out / "t.json")],
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        backends = [e["args"] for e in json.loads((out / "t.json").read_text())["traceEvents"]
                    if e.get("cat") == "backend"]
        misses = [a for a in backends if a["cache"] == "miss"]
        assert len(misses) == summary["runs"] and {a["execution"] for a in misses} == {how}, misses[:3]
        assert sum(a["bytes_uploaded"] for a in misses) == stats.report(out)["bytes_uploaded"]


@pytest.mark.slow
def test_split_dwarf_backends_bring_their_dwo_files_back(cluster: Cluster, tmp_path: Path, salt: str) -> None:
    """[chromium] -gsplit-dwarf on the link line with remote backends: each remote action declares its .dwo as
    an output, so the object and its .dwo come back, equal to a local build's, and the binary's skeleton
    units name files that exist."""
    cluster.ensure_server()
    args = ["--args", "symbol_level=2 use_debug_fission=true"]
    local, remote = tmp_path / "local", tmp_path / "remote"
    for out, endpoint in ((local, None), (remote, cluster.endpoint)):
        remote_flag = ["--remote", endpoint] if endpoint else []
        subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(EXAMPLE_ROOT), *args,
                        *remote_flag], check=True, capture_output=True,
                       env={**os.environ, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE})
        _ninja(out, salt + "-fission")
    summary = stats.report(remote)
    assert summary["runs"] > 100 and summary["remote_executions"] == summary["runs"], summary
    dwo = {str(p.relative_to(remote)): p.read_bytes() for p in (remote / "gn-thinlto").glob("*/native/**/*.dwo")}
    want = {str(p.relative_to(local)): p.read_bytes() for p in (local / "gn-thinlto").glob("*/native/**/*.dwo")}
    assert len(dwo) > 100 and sorted(dwo) == sorted(want)
    assert [name for name in want if dwo[name] != want[name]] == []
    text = subprocess.run(["/usr/lib/llvm-19/bin/llvm-dwarfdump", "--debug-info", str(remote / "exe.unstripped/calc")],
                          capture_output=True, text=True, check=True).stdout
    names = [line.split('("')[1].rstrip('")') for line in text.splitlines() if "DW_AT_dwo_name" in line]
    assert names and all((remote / n).is_file() for n in names)
    proc = subprocess.run([str(remote / "calc")], cwd=remote, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK calc")
