"""[trust] The backend step killed (SIGKILL) at random points of real misses (clang-19 compiling): the output is
always absent, the previous one or the right one, never a part; and the next run of the step leaves no
temporary file in the build directory (it sweeps what killed runs left beside the output)."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

ROUNDS = 40
SEED = 7
SOURCE = ("int f(int x) { return x * 3; }\n"
          "int g(int x) { int s = 0; for (int i = 0; i < x; ++i) s += f(i); return s; }\n")
STEP = REPO / "gn_thinlto" / "steps" / "backend.py"
CLANG = "/usr/lib/llvm-19/bin/clang"  # by its path, as the plans name it (a bare name is left to the Python step)


def _step(out: Path, bitcode: Path, cache: str) -> list[str]:
    cache_args = ["--cache", cache] if cache else ["--no-cache"]
    return [sys.executable, "-S", str(STEP), *cache_args, "--log", str(out / "gn-thinlto" / "backend.log"), "--",
            CLANG, "-c", "-x", "ir", str(bitcode), "-O2", "-o", str(out / "obj" / "a.native.o")]


def _workspace(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(build directory with obj/, a ThinLTO bitcode object, the native object its backend must make)."""
    out = tmp_path / "out"
    (out / "obj").mkdir(parents=True)
    (tmp_path / "a.c").write_text(SOURCE)
    bitcode = tmp_path / "a.o"
    subprocess.run(["clang-19", "-flto=thin", "-O2", "-c", str(tmp_path / "a.c"), "-o", str(bitcode)], check=True)
    reference = tmp_path / "reference.o"
    subprocess.run(["clang-19", "-c", "-x", "ir", str(bitcode), "-O2", "-o", str(reference)], check=True)
    return out, bitcode, reference


def _wait_for_temporary(directory: Path, proc: subprocess.Popen[bytes], timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        if any(p.name.endswith(".tmp") for p in directory.iterdir()):
            return
        time.sleep(0.001)


def test_killed_backend_steps_leave_no_partial_output_and_no_temporaries(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    out, bitcode, reference = _workspace(tmp_path)
    native = out / "obj" / "a.native.o"
    killed_with_temporaries = 0
    for n in range(ROUNDS):
        cache = "" if n % 2 else str(tmp_path / f"cache{n}")  # every round a miss: no cache, or a new one
        proc = subprocess.Popen(_step(out, bitcode, cache))
        if n % 4 == 3:  # timed from the first temporary file: on a loaded machine start-up alone can outlast any
            _wait_for_temporary(out / "obj", proc)  # fixed delay, and no kill would land mid-compile
            time.sleep(rng.uniform(0.0, 0.02))
        else:
            time.sleep(rng.uniform(0.01, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not native.exists() or native.read_bytes() == reference.read_bytes()
        killed_with_temporaries += any(p.name.endswith(".tmp") for p in (out / "obj").iterdir())
    assert killed_with_temporaries > 0  # some kills did land mid-compile: the sweep below is really tested
    done = subprocess.run(_step(out, bitcode, ""), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert native.read_bytes() == reference.read_bytes()
    assert sorted(p.name for p in (out / "obj").iterdir()) == ["a.native.o"]


def test_killed_launched_steps_leave_no_partial_output_and_no_temporaries(tmp_path: Path) -> None:
    """The same through the step launcher and the build directory's step server: the launcher's process group
    (launcher and compiler, as ninja stops an edge) killed at random points; the server lives on and serves the
    next runs."""
    from gn_thinlto.steps.launcher_build import build_launcher
    from gn_thinlto.steps.step_args import socket_path

    rng = random.Random(SEED)
    out, bitcode, reference = _workspace(tmp_path)
    assert build_launcher(str(out), "gn-thinlto/step-launcher") == ""
    native = out / "obj" / "a.native.o"

    def launched(cache: str) -> list[str]:
        step = _step(out, bitcode, cache)
        python, command = step[:step.index("--")], step[step.index("--"):]
        sock = socket_path(python, "gn-thinlto")
        return ["gn-thinlto/step-launcher", sock, *python, "--socket", sock, *command]

    warm = tmp_path / "warm"
    assert subprocess.run(launched(str(warm)), cwd=out).returncode == 0  # starts the server
    sock = out / launched(str(warm))[1]
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sock.exists(), "no step server came up"
    killed_unfinished = 0
    try:
        for _ in range(ROUNDS):
            shutil.rmtree(warm, ignore_errors=True)  # every round a miss, served by the same server
            native.unlink(missing_ok=True)
            proc = subprocess.Popen(launched(str(warm)), cwd=out, start_new_session=True)
            time.sleep(rng.uniform(0.01, 0.25))
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            assert not native.exists() or native.read_bytes() == reference.read_bytes()
            killed_unfinished += not native.exists()
        assert killed_unfinished > 0  # some kills did land mid-step
        time.sleep(0.5)  # the server sees a killed launcher's connection close and removes what its step left
        assert sorted(p.name for p in (out / "obj").iterdir()) in ([], ["a.native.o"])
        shutil.rmtree(warm, ignore_errors=True)
        acct = tmp_path / "accounting"
        done = subprocess.run(launched(str(warm)), cwd=out, capture_output=True, text=True,
                              env={**os.environ, "GN_THINLTO_STEP_ACCOUNTING": str(acct)})
        assert done.returncode == 0, done.stderr
        assert acct.read_text().startswith("launcher") and "python" not in acct.read_text()  # the server served it
        assert native.read_bytes() == reference.read_bytes()
        assert sorted(p.name for p in (out / "obj").iterdir()) == ["a.native.o"]
    finally:
        sock.unlink(missing_ok=True)  # the server leaves within a second
