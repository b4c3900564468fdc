"""`goma-ext worker`: run N Bots API worker processes with stable bot ids, restarting any that die."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from goma_ext.errors import GomaExtError, reason, shown
from goma_ext.remote.config import load_config
from goma_ext.remote.errors import RemoteConfigError
from goma_ext.worker.bots import BotWorker, WorkerSettings
from goma_ext.worker.policy import Allowlist

# Bare names are looked up on PATH; /usr/lib/llvm-N/bin/clang{,++} serve actions whose argv[0] is `clang`/`clang++`.
DEFAULT_COMPILERS = tuple(
    f"{prefix}{v}{suffix}"
    for v in (19, 22)
    for prefix, suffix in (
        ("clang-", ""),
        ("clang++-", ""),
        ("/usr/lib/llvm-", "/bin/clang"),
        ("/usr/lib/llvm-", "/bin/clang++"),
    )
)
RESTART_DELAY_S = 0.2


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("worker", help="run Bots API workers that execute allow-listed compiler actions")
    p.add_argument("--remote", required=True, help="grpc://HOST:PORT or grpcs://HOST:PORT of the BuildGrid server")
    p.add_argument("--instance", default="", help="REAPI instance name")
    p.add_argument("--ca-file", type=Path, help="CA certificate for grpcs://")
    p.add_argument("--work-dir", type=Path, required=True, help="scratch directory for sandboxes")
    p.add_argument("--bot-id", default=socket.gethostname(), help="stable bot id prefix (default: host name)")
    p.add_argument("--count", type=int, default=1, help="worker processes to run (ids BOT-ID-0 … BOT-ID-N-1)")
    p.add_argument(
        "--compiler",
        action="append",
        default=[],
        metavar="PROGRAM",
        help=f"allow-listed compiler (repeatable; default: those of {', '.join(DEFAULT_COMPILERS)} on PATH)",
    )
    p.add_argument("--index", type=int, help=argparse.SUPPRESS)
    p.set_defaults(run=run)


def _compilers(args: argparse.Namespace) -> list[str]:
    if args.compiler:
        return list(args.compiler)
    return [c for c in DEFAULT_COMPILERS if shutil.which(c)]


def _serve_one(args: argparse.Namespace) -> int:
    cfg = load_config({"endpoint": args.remote, "instance": args.instance, "ca_file": args.ca_file}, os.environ)
    if cfg is None:
        raise RemoteConfigError("worker needs --remote")
    bot_id = f"{args.bot_id}-{args.index}"
    s = WorkerSettings(cfg, bot_id, Allowlist.from_programs(_compilers(args)), args.work_dir / bot_id)
    try:
        (s.work_dir / "sandboxes").mkdir(parents=True, exist_ok=True)
        stale_sandboxes = list((s.work_dir / "sandboxes").iterdir())
    except OSError as e:
        raise GomaExtError(f"--work-dir {shown(args.work_dir)}: {reason(e)}") from e
    for stale in stale_sandboxes:  # left by a killed predecessor with this bot id
        shutil.rmtree(stale, ignore_errors=True)
    worker = BotWorker(s)

    def stop(_n: int, _f: FrameType | None) -> None:
        worker.stop()
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {bot_id} %(message)s")
    worker.run()
    return 0


def _supervise(args: argparse.Namespace) -> int:
    """Keep `count` children alive; a restarted child reuses its bot id, so BuildGrid requeues its lease at once."""
    base = (
        [sys.executable, "-m", "goma_ext.cli", *sys.argv[sys.argv.index("worker") :]] if "worker" in sys.argv else None
    )
    if base is None:
        base = [
            sys.executable,
            "-m",
            "goma_ext.cli",
            "worker",
            "--remote",
            args.remote,
            "--work-dir",
            str(args.work_dir),
        ]
    children: dict[int, subprocess.Popen[bytes]] = {}
    started: dict[int, float] = {}
    backoff: dict[int, float] = {}
    stopping = False

    def stop(_n: int, _f: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping:
        for i in range(args.count):
            child = children.get(i)
            now = time.monotonic()
            if child is not None and child.poll() is not None:
                quick = now - started.get(i, now) < 5.0
                backoff[i] = min(10.0, max(0.2, backoff.get(i, 0.1) * 2)) if quick else 0.0
                print(
                    f"worker {args.bot_id}-{i} exited with {child.returncode}; restarting", file=sys.stderr, flush=True
                )
                del children[i]
                child = None
            if child is None and now >= started.get(i, 0.0) + backoff.get(i, 0.0):
                children[i] = subprocess.Popen([*base, "--index", str(i)])
                started[i] = now
        time.sleep(RESTART_DELAY_S)
    for child in children.values():
        if child.poll() is None:
            child.terminate()
    deadline = time.monotonic() + 10
    for child in children.values():
        try:
            child.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            child.kill()
    return 0


def run(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise GomaExtError(f"--count {args.count}: run at least one worker")
    if args.index is not None:
        return _serve_one(args)
    return _supervise(args)
