"""[harden] A DTLTO backend with split DWARF never runs remotely: the remote job declared only the object, so the
.dwo stayed on the worker and the object named its staging path (an attacker's review, 2026-12-07, with
llvm-dwarfdump: DW_AT_dwo_name "stage/k/native.dwo"), and that object went into the shared caches."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from goma_ext.dtlto import distributor
from goma_ext.dtlto.jobfile import DistJob
from goma_ext.remote import stats
from thinlto_base.store import CacheStore


class _NoRemote:
    def run(self, *args: Any) -> None:
        raise AssertionError("a split-DWARF backend was sent to the remote")

    def close(self) -> None:
        pass


@pytest.mark.parametrize("flag", ["-gsplit-dwarf", "-gsplit-dwarf=single"])
def test_a_split_dwarf_backend_compiles_locally_with_one_warning(flag: str, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the distributor's paths are relative to the link's directory
    (tmp_path / "a.o").write_bytes(b"bitcode")
    shutil.copyfile(Path(__file__).parent / "index_data" / "llvm22-a.o.thinlto.bc", tmp_path / "a.thinlto.bc")
    d = object.__new__(distributor.Distributor)
    d.settings = distributor.Settings(remote=None, cache=CacheStore(""), cache_policy="", slots=None,  # type: ignore[arg-type]
                                      stats_log=None)
    d._remote = _NoRemote()  # type: ignore[assignment]
    d.cwd = tmp_path
    warned: list[str] = []
    d._warn_once = lambda message, kind="": warned.append(kind)  # type: ignore[method-assign]
    ran: list[str] = []

    def local(job: DistJob, backend: Any, start: float) -> stats.RunRecord:
        ran.append(job.output)
        return stats.RunRecord(job.output, stats.Mode.LOCAL, 0, 0.0)

    d._local_job = local  # type: ignore[method-assign]
    job = DistJob(("clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.thinlto.bc", "-g", flag, "-o", "a.native.o"),
                  "a.o", "a.thinlto.bc", "a.native.o", ("a.o",), ("a.native.o",))
    record = d._run_job(job, time.monotonic())
    assert record.exit_code == 0 and ran == ["a.native.o"] and warned == ["remote:split-dwarf"]


def test_a_machine_dependent_backend_compiles_locally_with_one_warning(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """-fno-integrated-as (or -march=native) with a remote configured: the job runs locally, the link goes on (a
    review of 49ab385 found the refusal failing the whole link)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.o").write_bytes(b"bitcode")
    d = object.__new__(distributor.Distributor)
    d._remote = _NoRemote()  # type: ignore[assignment]
    d.cwd = tmp_path
    d.jobs = None  # type: ignore[assignment]
    warned: list[str] = []
    d._warn_once = lambda message, kind="": warned.append(f"{kind} {message}")  # type: ignore[method-assign]
    for flag in ("-fno-integrated-as", "-march=native"):
        job = DistJob(("clang", "-c", "-x", "ir", "a.o", flag, "-o", "a.native.o"), "a.o", "", "a.native.o",
                      ("a.o",), ("a.native.o",))
        assert d._remote_job(job, distributor.BackendJob(job.argv, "a.o", "", "a.native.o"), "k", 0.0) is None
    assert [w.split(":")[:2] for w in warned] == [["remote", "machine -fno-integrated-as"],
                                                  ["remote", "machine -march=native"]]


def test_a_local_job_that_writes_an_empty_object_fails(tmp_path: Path) -> None:
    """clang's ThinLTO backend exits 0 with a 0-byte object after an error it only prints; lld links that."""
    import threading

    from goma_ext.dtlto.slots import Slots

    compiler = tmp_path / "cc"
    compiler.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\n: > "$2"\n')
    compiler.chmod(0o755)
    (tmp_path / "a.o").write_bytes(b"bitcode")
    d = object.__new__(distributor.Distributor)
    d.settings = distributor.Settings(remote=None, cache=CacheStore(""), cache_policy="",
                                      slots=Slots(tmp_path / "slots", 1), stats_log=None)
    d._remote = None
    d.cwd = tmp_path
    d._print = threading.Lock()
    d._record = lambda job, mode, code, start, phases=None: code  # type: ignore[assignment,method-assign,misc]
    argv = (str(compiler), "-c", "-x", "ir", "a.o", "-o", "a.native.o")
    job = DistJob(argv, "a.o", "", "a.native.o", ("a.o",), ("a.native.o",))
    assert d._local_job(job, distributor.BackendJob.parse(argv), 0.0) == 1
    assert not (tmp_path / "a.native.o").exists()
