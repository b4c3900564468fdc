"""Real ThinLTO backends (clang-19, lld-19 --thinlto-index-only) run remotely: byte-identical, then cached."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.subjects import thin_program
from bench.subjects.thin_program import ThinProgram
from goma_ext.remote import stats
from tests.remote.conftest import Cluster, no_temp_files, records, wrapper


def _build_all(program: ThinProgram, remote: str, salt: str) -> None:
    for m in thin_program.MODULES:
        run = wrapper(program, program.backend(m), remote, salt)
        assert run.returncode == 0, run.stderr
        assert "warning" not in run.stderr, run.stderr


def test_remote_backends_are_byte_identical_to_local(
    cluster: Cluster, program: ThinProgram, ref: dict[str, bytes], salt: str
) -> None:
    _build_all(program, cluster.endpoint, salt)
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE] * len(thin_program.MODULES)
    for m in thin_program.MODULES:
        assert program.native(m).read_bytes() == ref[m], m
    assert program.link_and_check() == "self-check ok"
    assert no_temp_files(program) == []


def test_fresh_build_directory_is_served_from_the_action_cache(
    cluster: Cluster, program: ThinProgram, tmp_path: Path, salt: str
) -> None:
    again = program.copy(tmp_path / "again")
    _build_all(program, cluster.endpoint, salt)
    _build_all(again, cluster.endpoint, salt)
    summary = stats.report(again.out)
    assert summary["remote_executions"] == 0
    assert summary["cache_hits"] == len(thin_program.MODULES)
    assert summary["bytes_uploaded"] == 0
    first = stats.report(program.out)
    assert first["remote_executions"] == len(thin_program.MODULES)
    # naive: every backend would upload all five bitcode objects of the link
    assert first["naive_upload_bytes"] > first["input_bytes"] >= first["bytes_uploaded"] > 0
    for m in thin_program.MODULES:
        assert again.native(m).read_bytes() == program.native(m).read_bytes()
    assert again.link_and_check() == "self-check ok"


def test_report_sums_the_stats_log(cluster: Cluster, program: ThinProgram, salt: str) -> None:
    _build_all(program, cluster.endpoint, salt)
    proc = subprocess.run(
        [sys.executable, "-m", "goma_ext.cli", "report", str(program.out), "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["runs"] == len(thin_program.MODULES)
    assert summary["naive_upload_bytes"] == len(thin_program.MODULES) * sum(
        (program.out / "obj" / f"{m}.o").stat().st_size for m in thin_program.MODULES
    )
