"""Running the external build tools (gn, ninja) with clear errors, progress and log files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gn_thinlto.errors import GnThinltoError

NINJA_STATUS = "[%f/%t] "
HOOK_ERROR = "gn-thinlto: error: "  # how the hook's error line starts (in gn's output when the hook fails)
_STATUS_RE = re.compile(r"^\[(\d+)/(\d+)\] ")


def find_tool(name: str, env_var: str | None = None) -> str:
    """Locate a tool on PATH (or from an environment override); fail with one clear line if absent."""
    candidate = os.environ.get(env_var, "") if env_var else ""
    path = shutil.which(candidate or name)
    if path is None:
        raise GnThinltoError(f"required tool '{candidate or name}' not found on PATH (run ./dev example to install it)")
    return path


def run_checked(cmd: Sequence[str], *, cwd: Path | None = None, log: Path | None = None) -> str:
    """Run a command to completion; return stdout, or raise naming the command and the log/stderr tail."""
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    if log is not None:
        with log.open("a") as f:
            f.write(f"$ {' '.join(cmd)}\n{proc.stdout}{proc.stderr}")
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        # The hook's own error line, else GN's ("ERROR at //x/BUILD.gn:3:5: …", not the source excerpt and caret
        # after it, nor "ERROR Python has quit" after the hook's line).
        hook = [line.removeprefix(HOOK_ERROR) for line in lines if line.startswith(HOOK_ERROR)][:1]
        tail = hook or [line for line in lines if line.startswith("ERROR")][:1] or lines[-1:] or ["(no output)"]
        where = f" (full output in {log})" if log else ""
        raise GnThinltoError(
            f"'{Path(cmd[0]).name} {' '.join(cmd[1:3])}…' failed with exit {proc.returncode}: {tail[0]}{where}"
        )
    return proc.stdout


def gn_gen(out_dir: Path, root: Path, args: str = "", extra: Sequence[str] = (), log: Path | None = None) -> str:
    """`gn gen OUT --root=ROOT --args=ARGS [extra…]`; returns gn's stdout (which includes hook output)."""
    cmd = [find_tool("gn", "GN"), "gen", str(out_dir), f"--root={root}"]
    if args:
        cmd.append(f"--args={args}")
    return run_checked([*cmd, *extra], log=log)


def gn_ls(out_dir: Path, root: Path, *flags: str) -> list[str]:
    """`gn ls OUT FLAGS…`, one result per element."""
    out = run_checked([find_tool("gn", "GN"), "ls", str(out_dir), f"--root={root}", *flags])
    return [line.strip() for line in out.splitlines() if line.strip()]


@dataclass(frozen=True)
class NinjaRun:
    """What a ninja invocation did: edges it ran and how long it took."""

    edges_run: int
    seconds: float


def ninja_build(out_dir: Path, targets: Sequence[str] = (), *, log: Path, show_progress: bool = True) -> NinjaRun:
    """Run ninja, writing its full output to LOG and a one-line progress indicator to stderr."""
    cmd = [find_tool("ninja", "NINJA"), "-C", str(out_dir), *targets]
    env = dict(os.environ, NINJA_STATUS=NINJA_STATUS)
    start = time.monotonic()
    edges = 0
    tty = sys.stderr.isatty()
    last_shown = -1
    with (
        log.open("a") as logf,
        subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc,
    ):
        assert proc.stdout is not None  # guaranteed by stdout=PIPE
        for line in proc.stdout:
            logf.write(line)
            m = _STATUS_RE.match(line)
            if not m:
                continue
            edges, total = int(m.group(1)), int(m.group(2))
            if not show_progress:
                continue
            pct = 100 * edges // max(total, 1)
            if tty:
                print(f"\r  building: {edges}/{total} ({pct}%)", end="", file=sys.stderr, flush=True)
            elif pct // 25 != last_shown:
                last_shown = pct // 25
                print(f"  building: {edges}/{total} ({pct}%)", file=sys.stderr, flush=True)
        rc = proc.wait()
    if tty and show_progress and edges:
        print(file=sys.stderr)
    if rc != 0:
        raise GnThinltoError(f"ninja -C {out_dir} failed (exit {rc}); see {log}")
    return NinjaRun(edges_run=edges, seconds=time.monotonic() - start)
