"""Run one command and measure it: wall time, CPU time and peak RSS of its whole process tree (wait4)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


# GNU time forks the command from a small process: ru_maxrss of a child forked from this Python process
# would start at Python's own RSS (Linux carries the RSS high-water mark across fork and exec).
TIME = "/usr/bin/time"


class BenchError(Exception):
    """A benchmark step failed; the message is one line naming the command."""


def progress(line: str) -> None:
    """A progress line: on stderr, so stdout holds only the results a user or a script reads."""
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Sample:
    """One measured process tree. max_rss_mib is the largest single process in the tree (Linux ru_maxrss)."""

    wall_s: float
    cpu_s: float
    max_rss_mib: float
    returncode: int
    output: str


def run(cmd: Sequence[str], cwd: Path | None = None, env: Mapping[str, str] | None = None,
        check: bool = True, log: Path | None = None) -> Sample:
    """Run CMD under GNU time to completion; stdout+stderr are kept (and appended to LOG when given).

    wall and CPU come from wait4 on the whole tree; peak RSS is GNU time's %M (largest process in the tree)."""
    full_env = dict(os.environ, **env) if env else None
    out_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-{os.getpid()}-{time.monotonic_ns()}.out"
    rss_path = out_path.with_suffix(".rss")
    with open(out_path, "w+b") as out:
        start = time.perf_counter()
        proc = subprocess.Popen([TIME, "-f", "%M", "-o", str(rss_path), *cmd], cwd=cwd, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode(errors="replace")
    out_path.unlink()
    rss_kib = _time_rss(rss_path)
    if proc.returncode == 0 and rss_kib is None:
        raise BenchError(f"{TIME} wrote no peak RSS for {cmd[0]}")
    if log is not None:
        with open(log, "a") as f:
            f.write(f"$ (cd {cwd or '.'} && {' '.join(cmd)})\n{text}\n")
    if check and proc.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-5:])
        raise BenchError(f"{' '.join(cmd)[:200]} (in {cwd}) exited {proc.returncode}: {tail[-800:]}")
    return Sample(wall_s=wall, cpu_s=usage.ru_utime + usage.ru_stime, max_rss_mib=(rss_kib or 0) / 1024,
                  returncode=proc.returncode, output=text)


def _time_rss(path: Path) -> int | None:
    """The last line of GNU time's -o file: %M, peak RSS in KiB (earlier lines: the command's exit status)."""
    try:
        lines = path.read_text().split()
        path.unlink()
    except OSError:
        return None
    return int(lines[-1]) if lines and lines[-1].isdigit() else None


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is missing or b is zero."""
    if a is None or b is None or b == 0:
        return None
    return a / b
