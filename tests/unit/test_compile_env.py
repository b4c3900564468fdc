"""Local backend compiles run without the variables that would make them differ from a remote one or from their
cache key (thinlto_base.compile_env): through the Python step, the step server's launcher, goma-ext's local
fallback and DTLTO's local jobs."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from gn_thinlto.steps.launcher_build import LAUNCHER_SOURCE
from thinlto_base.compile_env import COMPILE_MARK, UNSET, compile_environment
from tests.unit.test_step_server import Dir, build  # noqa: F401  (the fixture)

SET = {name: f"/planted/{name.lower()}" for name in UNSET}


def test_launcher_c_removes_the_same_names_after_the_same_mark() -> None:
    source = open(LAUNCHER_SOURCE).read()
    body = re.search(r"UNSET_FOR_COMPILES\[\] = \{(.*?)\};", source, re.DOTALL)
    assert body, "launcher.c no longer spells UNSET_FOR_COMPILES as this test reads it"
    assert tuple(re.findall(r'"([^"]+)"', body.group(1))) == UNSET
    assert f'#define COMPILE_MARK "{COMPILE_MARK}"' in source


def test_the_compile_environment_keeps_everything_else() -> None:
    env = {**SET, "PATH": "/usr/bin", "TMPDIR": "/tmp/x", "LANG": "C.UTF-8"}
    assert compile_environment(env) == {"PATH": "/usr/bin", "TMPDIR": "/tmp/x", "LANG": "C.UTF-8"}


def _env_recording_compiler(path: Path) -> None:
    """A compiler that writes the UNSET variables it sees into its output."""
    shown = " ".join(f"{name}=${{{name}-}}" for name in UNSET)
    path.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\n'
                    f'printf "%s" "{shown}" > "$2"\n')
    path.chmod(0o755)


def test_the_python_step_and_the_step_servers_launcher_compile_without_them(build: Dir) -> None:  # noqa: F811
    _env_recording_compiler(build.compiler)
    (build.root / "a.o").write_text("A")
    (build.root / "b.o").write_text("B")
    env = {**os.environ, **SET, "GN_THINLTO_STEP_ACCOUNTING": str(build.accounting)}
    clean = " ".join(f"{name}=" for name in UNSET)
    for name in ("a.o", "b.o"):  # the first by the Python step (it starts the server), the second served
        done = subprocess.run(build.command(name), cwd=build.root, capture_output=True, text=True, env=env,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        if name == "a.o":
            build.server_up()
        assert (build.root / f"app/{name}.native.o").read_text() == clean
    assert build.served() == ["python", "server"]


def test_a_dtlto_local_job_runs_without_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from goma_ext.dtlto import distributor
    from goma_ext.dtlto.jobfile import DistJob
    from goma_ext.dtlto.slots import Slots
    from thinlto_base.keys import BackendJob

    compiler = tmp_path / "cc"
    _env_recording_compiler(compiler)
    for name, value in SET.items():
        monkeypatch.setenv(name, value)
    d = object.__new__(distributor.Distributor)
    d.settings = distributor.Settings(remote=None, cache=None, cache_policy="",  # type: ignore[arg-type]
                                      slots=Slots(tmp_path / "slots", 1), stats_log=None)
    d._remote = None
    d.cwd = tmp_path
    d._print = threading.Lock()
    d._record = lambda job, mode, code, start, phases=None: code  # type: ignore[assignment,method-assign,misc]
    argv = (str(compiler), "-c", "-x", "ir", "a.o", "-fthinlto-index=a.thinlto.bc", "-o", "a.native.o")
    job = DistJob(argv, "a.o", "a.thinlto.bc", "a.native.o", ("a.o",), ("a.native.o",))
    assert d._local_job(job, BackendJob.parse(argv), 0.0) == 0
    assert (tmp_path / "a.native.o").read_text() == " ".join(f"{name}=" for name in UNSET)


def test_goma_ext_local_fallback_runs_without_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from goma_ext.remote.wrapper import run_local

    compiler = tmp_path / "cc"
    _env_recording_compiler(compiler)
    for name, value in SET.items():
        monkeypatch.setenv(name, value)
    assert run_local([str(compiler), "-o", "out.o"], tmp_path) == 0
    assert (tmp_path / "out.o").read_text() == " ".join(f"{name}=" for name in UNSET)


def test_a_remote_launcher_keeps_the_environment_and_a_compile_does_not(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only compiles run without the variables: a remote launcher (goma-ext, whose interpreter may need
    LD_LIBRARY_PATH) keeps them, and cleans them itself for its local fallback (a review of cad6970)."""
    from gn_thinlto.steps.backend import launch

    tool = tmp_path / "tool"
    _env_recording_compiler(tool)
    monkeypatch.chdir(tmp_path)
    for name, value in SET.items():
        monkeypatch.setenv(name, value)
    assert launch([COMPILE_MARK, str(tool), "-o", "compiled"]) == 0
    assert (tmp_path / "compiled").read_text() == " ".join(f"{name}=" for name in UNSET)
    assert launch([str(tool), "-o", "launched"]) == 0
    assert (tmp_path / "launched").read_text() == " ".join(f"{name}={value}" for name, value in SET.items())
