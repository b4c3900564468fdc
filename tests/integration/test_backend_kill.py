"""[trust] The backend step killed (SIGKILL) at random points of real misses (clang-19 compiling): the output is
always absent, the previous one or the right one, never a part; and the next run of the step leaves no
temporary file in the build directory (it sweeps what killed runs left beside the output)."""

from __future__ import annotations

import random
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


def _step(out: Path, bitcode: Path, cache: str) -> list[str]:
    cache_args = ["--cache", cache] if cache else ["--no-cache"]
    return [sys.executable, "-S", str(STEP), *cache_args, "--log", str(out / "gn-thinlto" / "backend.log"), "--",
            "clang-19", "-c", "-x", "ir", str(bitcode), "-O2", "-o", str(out / "obj" / "a.native.o")]


def test_killed_backend_steps_leave_no_partial_output_and_no_temporaries(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    out = tmp_path / "out"
    (out / "obj").mkdir(parents=True)
    (tmp_path / "a.c").write_text(SOURCE)
    bitcode = tmp_path / "a.o"
    subprocess.run(["clang-19", "-flto=thin", "-O2", "-c", str(tmp_path / "a.c"), "-o", str(bitcode)], check=True)
    reference = tmp_path / "reference.o"
    subprocess.run(["clang-19", "-c", "-x", "ir", str(bitcode), "-O2", "-o", str(reference)], check=True)
    native = out / "obj" / "a.native.o"
    killed_with_temporaries = 0
    for n in range(ROUNDS):
        cache = "" if n % 2 else str(tmp_path / f"cache{n}")  # every round a miss: no cache, or a new one
        proc = subprocess.Popen(_step(out, bitcode, cache))
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
