"""`goma-ext dtlto` as clang/lld 22's distributor, on a small C program: links that work, a shared backend cache,
and each error path (failing compile, missing output, malformed or missing job file, missing input, an
unreachable server)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from goma_ext.remote import stats
from tests.dtlto_program import CLANG, EXPECTED_OUTPUT, GOMA_EXT, build, keeper, link, records
from tests.dtlto_program import run as _run


@pytest.fixture()
def program(tmp_path: Path) -> Path:
    return build(tmp_path / "build")


def _link(work: Path, *extra: str, out: str = "app", dist: tuple[str, ...] = (),
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return link(work, *extra, out=out, dist=dist, env=env)


def _records(work: Path) -> list[stats.RunRecord]:
    return records(work)


def _defined_functions(path: Path) -> set[str]:
    out = subprocess.run(["llvm-nm-22", "--defined-only", str(path)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines() if line.split()[1:2] in (["T"], ["t"])}


def test_link_through_distributor_runs_and_matches_in_process(program: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    done = _link(program, dist=(f"--cache={cache}", "--jobs=2"))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    in_process = _run([CLANG, "-fuse-ld=lld", "-flto=thin", "util.o", "main.o", "liblib.a", "-o", "app.inproc"],
                      program)
    assert in_process.returncode == 0, in_process.stderr
    assert _run(["./app"], program).stdout == _run(["./app.inproc"], program).stdout == EXPECTED_OUTPUT
    assert _defined_functions(program / "app") == _defined_functions(program / "app.inproc")
    first = _records(program)
    assert [r.mode for r in first] == [stats.Mode.LOCAL] * 3
    # The same link in another build directory: every backend from the shared cache, the same binary.
    other = tmp_path / "other"
    shutil.copytree(program, other, ignore=shutil.ignore_patterns("app*", "*.jsonl"))
    done = _link(other, dist=(f"--cache={cache}",))
    assert done.returncode == 0, done.stderr
    assert [r.mode for r in _records(other)] == [stats.Mode.BACKEND_CACHE] * 3
    report = _run([GOMA_EXT, "report", ".", "--dtlto"], other)
    assert report.stdout.startswith("3 backend runs: 0 remote, 0 cache hits, 0 local fallbacks, 0 local, "
                                    "3 from the backend cache; 0 failed\n"), report.stdout + report.stderr
    assert (other / "app").read_bytes() == (program / "app").read_bytes()
    # No per-link files left behind by us (lld removes its own).
    assert not [p.name for p in program.iterdir() if ".native." in p.name or p.name.endswith(".tmp")]


def test_failing_compile_prints_its_error_once_and_fails_the_link(program: Path) -> None:
    done = _link(program, "-Wl,--thinlto-remote-compiler-arg=-fno-such-flag", dist=("--no-cache", "--jobs=1"))
    assert done.returncode != 0
    assert done.stderr.count("unknown argument: '-fno-such-flag'") == 1, done.stderr
    assert "goma-ext: dtlto: app: a backend job failed; no outputs left" in done.stderr
    assert not (program / "app").exists()
    assert not [p.name for p in program.iterdir() if ".native." in p.name]


def test_compiler_that_writes_nothing_fails_the_link(program: Path, tmp_path: Path) -> None:
    fake = tmp_path / "fake-clang"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    done = _link(program, f"-Wl,--thinlto-remote-compiler={fake}", dist=("--no-cache",))
    assert done.returncode != 0
    assert "exited 0 but did not write" in done.stderr, done.stderr
    assert not (program / "app").exists()


def _job_file(program: Path) -> Path:
    """A real job file: lld's, kept by a distributor that copies it and then runs goma-ext."""
    done = link(program, "-Wl,--save-temps", dist=("--no-cache",), distributor=keeper(program))
    assert done.returncode == 0, done.stderr
    return program / "kept.json"


def _dtlto(program: Path, job_file: str, *options: str) -> subprocess.CompletedProcess[str]:
    return _run([GOMA_EXT, "dtlto", "--no-cache", *options, job_file], program)


def test_malformed_job_file_is_one_line(program: Path) -> None:
    (program / "cut.json").write_text(_job_file(program).read_text()[:200])
    done = _dtlto(program, "cut.json")
    assert done.returncode == 2
    assert done.stderr.startswith("goma-ext: error: cut.json: not JSON") and done.stderr.count("\n") == 1
    done = _dtlto(program, "absent.json")
    assert done.returncode == 2 and "absent.json: no such job file" in done.stderr
    assert done.stderr.count("\n") == 1


def test_unknown_layout_names_the_key(program: Path) -> None:
    doc = json.loads(_job_file(program).read_text())
    doc["jobs"][0]["priority"] = 1
    (program / "new.json").write_text(json.dumps(doc))
    done = _dtlto(program, "new.json")
    assert done.returncode == 2
    assert "new.json: jobs[0]: unknown key 'priority'" in done.stderr and "lld a different version" in done.stderr


def test_missing_input_leaves_no_outputs(program: Path) -> None:
    doc = json.loads(_job_file(program).read_text())
    doc["jobs"][0]["inputs"].append("gone.o")
    (program / "gone.json").write_text(json.dumps(doc))
    before = sorted(p.name for p in program.iterdir())
    done = _dtlto(program, "gone.json")
    assert done.returncode == 2
    assert "gone.json: input 'gone.o' does not exist" in done.stderr and done.stderr.count("\n") == 1
    assert sorted(p.name for p in program.iterdir()) == before


def test_unreachable_server_falls_back_with_one_warning(program: Path) -> None:
    done = _link(program, dist=("--no-cache", "--remote=grpc://127.0.0.1:1"),
                 env={**os.environ, "GOMA_EXT_RPC_TIMEOUT": "2"})
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "compiling locally" in warnings[0], done.stderr
    assert [r.mode for r in _records(program)] == [stats.Mode.FALLBACK] * 3
    assert _run(["./app"], program).stdout == EXPECTED_OUTPUT


def test_options_from_environment_and_config_file(program: Path, tmp_path: Path) -> None:
    config = tmp_path / "dtlto.yaml"
    config.write_text(f"dtlto:\n  cache: {tmp_path / 'from-config'}\n  stats_log: from-config.jsonl\n")
    env = {**os.environ, "GOMA_EXT_DTLTO_CONFIG": str(config), "GOMA_EXT_DTLTO": "--stats-log=from-env.jsonl"}
    done = _link(program, env=env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "from-config" / "ac").is_dir()
    assert len(stats.read(program / "from-env.jsonl")) == 3  # the environment beats the config file
    config.write_text("dtlto:\n  cahce: x\n")
    done = _link(program, env=env)
    assert done.returncode != 0 and "dtlto.cahce: unknown setting" in done.stderr
