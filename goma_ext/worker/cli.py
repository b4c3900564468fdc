"""`goma-ext worker`: run N Bots API worker processes with stable bot ids, restarting any that die."""

from __future__ import annotations

import argparse
import logging
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from goma_ext.errors import GomaExtError, reason, shown
from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.remote.config import RemoteConfig, check_secrets, load_config
from goma_ext.worker import baseroot
from goma_ext.worker.baseroot import DEFAULT_PACKAGES
from goma_ext.worker.bots import BotWorker, WorkerSettings
from goma_ext.worker.filecache import DEFAULT_MAX_BYTES as DEFAULT_FILE_CACHE_BYTES
from goma_ext.worker.filecache import FileCache
from goma_ext.worker.lease import probe, remove_box
from goma_ext.worker.policy import Allowlist, Offer, PlatformError
from goma_ext.worker.sandbox import BASE_ROOT_MOUNT_POINTS, DEFAULT_RO_PATHS, Isolation, IsolationMode, Limits, RunAs
from thinlto_base import safefs

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
DEFAULT_RUNNER = "goma-ext-runner"  # the unprivileged user a root worker runs actions as
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


class WorkerConfigError(GomaExtError):
    """The worker cannot start as configured (one line for the user)."""


def _size(text: str) -> int:
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1:] if t[-1:] in _UNITS and t[-1:] else ""
    try:
        return int(float(t[: len(t) - len(unit)]) * _UNITS[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4G, 512M, 0 = unlimited)") from None


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("worker", help="run Bots API workers that execute allow-listed compiler actions")
    p.add_argument("--remote", help="grpc://HOST:PORT or grpcs://HOST:PORT of the BuildGrid server (required)")
    p.add_argument("--instance", default="", help="REAPI instance name")
    p.add_argument("--ca-file", type=Path, help="CA certificate for grpcs://")
    p.add_argument("--client-cert", type=Path,
                   help="client certificate (PEM) for a server that requires mTLS (or GOMA_EXT_REMOTE_CLIENT_CERT)")
    p.add_argument("--client-key", type=Path, help="private key (PEM) of --client-cert (or GOMA_EXT_REMOTE_CLIENT_KEY)")
    p.add_argument("--work-dir", type=Path, help="scratch directory for sandboxes (required)")
    p.add_argument("--bot-id", help="stable bot id prefix (default: host name)")
    p.add_argument("--count", type=int, default=1, help="worker processes to run (ids BOT-ID-0 … BOT-ID-N-1)")
    p.add_argument(
        "--compiler",
        action="append",
        default=[],
        metavar="PROGRAM",
        help=f"allow-listed compiler (repeatable; default: those of {', '.join(DEFAULT_COMPILERS)} on PATH)",
    )
    lim = Limits()
    p.add_argument(
        "--isolation", choices=[m.value for m in IsolationMode], default=IsolationMode.BWRAP.value,
        help="bwrap (default): every action in a bubblewrap sandbox; none: NO sandbox, for debugging only "
        "(every lease result says so)",
    )
    p.add_argument(
        "--run-as", metavar="USER",
        help=f"unprivileged user a worker started as root runs actions as (default: {DEFAULT_RUNNER}, which must "
        "exist; never root). A worker started as another user runs them as itself inside a user namespace",
    )
    p.add_argument(
        "--sandbox-dir", type=Path,
        help="where per-action directories live (default: WORK-DIR/sandboxes); the --run-as user must be able to "
        "search (x) every parent directory",
    )
    p.add_argument(
        "--ro-path", action="append", default=[], metavar="PATH",
        help=f"extra host path visible read-only in the sandbox (repeatable; always: {' '.join(DEFAULT_RO_PATHS)})",
    )
    p.add_argument("--wall-time", type=float, default=lim.wall_s, metavar="S",
                   help="wall-time limit per action, seconds (default: %(default)s; SIGTERM, then SIGKILL)")
    p.add_argument("--cpu-time", type=int, default=lim.cpu_s, metavar="S",
                   help="CPU-time limit per action, seconds (RLIMIT_CPU; default: %(default)s; 0 = unlimited)")
    p.add_argument("--memory", type=_size, default=lim.memory_bytes, metavar="SIZE",
                   help="address-space limit per process (RLIMIT_AS; default: 4G; 0 = unlimited)")
    p.add_argument("--file-size", type=_size, default=lim.file_size_bytes, metavar="SIZE",
                   help="largest file an action may write (RLIMIT_FSIZE; default: 4G; 0 = unlimited)")
    p.add_argument("--max-procs", type=int, default=lim.processes, metavar="N",
                   help="processes and threads of the runner uid (RLIMIT_NPROC, counted per uid across workers "
                   "sharing it; default: %(default)s; 0 = unlimited)")
    p.add_argument("--tmp-size", type=_size, default=lim.tmp_bytes, metavar="SIZE",
                   help="the sandbox's /tmp, a tmpfs in memory that --memory does not count (default: 1G; "
                   "0 = half the RAM, tmpfs's own default)")
    p.add_argument("--max-stream-bytes", type=_size, default=lim.stream_bytes, metavar="SIZE",
                   help="stdout and stderr of an action, each; past it the action is killed and fails with "
                   "RESOURCE_EXHAUSTED (default: 64M; 0 = unlimited)")
    p.add_argument("--max-input-nodes", type=int, default=lim.input_nodes, metavar="N",
                   help="entries of an input tree once expanded, checked before anything is written "
                   "(default: %(default)s; 0 = unlimited)")
    p.add_argument("--max-input-bytes", type=_size, default=lim.input_bytes, metavar="SIZE",
                   help="file bytes of an input tree once expanded (default: 32G; 0 = unlimited)")
    p.add_argument("--max-input-depth", type=int, default=lim.input_depth, metavar="N",
                   help="directory levels of an input tree (default: %(default)s)")
    p.add_argument("--max-outputs", type=int, default=lim.outputs, metavar="N",
                   help="output paths an action may declare (default: %(default)s; 0 = unlimited)")
    p.add_argument("--max-output-bytes", type=_size, default=lim.output_bytes, metavar="SIZE",
                   help="bytes of an action's outputs together (default: 16G; 0 = unlimited)")
    p.add_argument("--min-free-disk", type=_size, default=lim.free_disk_bytes, metavar="SIZE",
                   help="free space the file system of --sandbox-dir keeps while actions run: an action that takes "
                   "it below is killed and fails with RESOURCE_EXHAUSTED (default: 1G; 0 = no floor)")
    p.add_argument("--min-free-inodes", type=int, default=lim.free_inodes, metavar="N",
                   help="free inodes that file system keeps, likewise (default: %(default)s; 0 = no floor)")
    p.add_argument(
        "--file-cache", type=Path, metavar="DIR",
        help="worker-local cache of input files by digest, shared by the --count workers (default: "
        "WORK-DIR/file-cache; best on the file system of --sandbox-dir, where its files are hard-linked)",
    )
    p.add_argument("--file-cache-size", type=_size, default=DEFAULT_FILE_CACHE_BYTES, metavar="SIZE",
                   help="bound of --file-cache; least recently used files go first (default: 10G; 0 = unbounded)")
    p.add_argument(
        "--base-root", type=Path, metavar="DIR",
        help="the sandbox's / (read-only; made by `goma-ext worker base-root DIR`) instead of the host's /usr and "
        "friends; such a worker has no host compilers and runs only programs shipped in the input root",
    )
    p.add_argument(
        "--platform", action="append", default=[], metavar="KEY=VALUE",
        help="platform property to advertise (repeatable), e.g. container-image=NAME; an action asking for another "
        "value of an advertised key, or for any container-image this worker does not run, is refused",
    )
    p.add_argument(
        "--no-input-programs", dest="input_programs", action="store_false",
        help="refuse actions whose argv[0] is a path to a program in the input root (hermetic actions; by default "
        "they run, always sandboxed); only allow-listed compilers run",
    )
    p.add_argument("--index", type=int, help=argparse.SUPPRESS)
    p.set_defaults(run=run)
    sub = p.add_subparsers(dest="worker_command", metavar="{base-root}")
    b = sub.add_parser("base-root", help="build a minimal sandbox / from the host's Debian packages (for --base-root)")
    b.add_argument("dir", type=Path, metavar="DIR", help="where to build it (absent or empty)")
    b.add_argument(
        "--package", action="append", default=[], metavar="P",
        help=f"another installed Debian package to include (repeatable; always: {' '.join(DEFAULT_PACKAGES)})",
    )
    b.set_defaults(run=run_base_root)


def run_base_root(args: argparse.Namespace) -> int:
    packages = [*DEFAULT_PACKAGES, *args.package]
    summary = baseroot.build(args.dir.absolute(), packages)
    print(f"goma-ext worker: {summary.line(args.dir, list(dict.fromkeys(packages)))}")
    return 0


def _compilers(args: argparse.Namespace) -> list[str]:
    if args.compiler:
        return list(args.compiler)
    if args.base_root is not None:
        return []  # the host's compilers are not in the base root; hermetic actions bring their own
    return [c for c in DEFAULT_COMPILERS if shutil.which(c)]


def _base_root(args: argparse.Namespace) -> Path | None:
    if args.base_root is None:
        return None
    if args.compiler or args.ro_path:
        flag = "--compiler" if args.compiler else "--ro-path"
        raise WorkerConfigError(f"{flag} and --base-root exclude each other: a base-root worker runs only programs "
                                "from the input root, on nothing of the host but its kernel")
    if args.isolation != IsolationMode.BWRAP.value:
        raise WorkerConfigError("--base-root is the sandbox's /: it needs --isolation bwrap")
    base: Path = args.base_root.absolute()
    missing = [d for d in BASE_ROOT_MOUNT_POINTS if not (base / d).is_dir()]
    if missing:
        raise WorkerConfigError(f"--base-root {shown(base)} lacks {', '.join(missing)} (bwrap needs these mount "
                                "points in a read-only /): build it with `goma-ext worker base-root DIR`")
    return base


def _offer(args: argparse.Namespace) -> Offer:
    try:
        return Offer.parse(args.platform)
    except PlatformError as e:
        raise WorkerConfigError(str(e)) from None


def _run_as(args: argparse.Namespace) -> RunAs | None:
    if os.geteuid() != 0:
        if args.run_as and args.run_as != pwd.getpwuid(os.geteuid()).pw_name:
            raise WorkerConfigError(f"--run-as {args.run_as} needs a worker started as root")
        return None
    name = args.run_as or DEFAULT_RUNNER
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise WorkerConfigError(
            f"the worker runs as root and never runs actions as root, but user {name!r} does not exist: create it "
            f"(useradd --system --no-create-home --shell /usr/sbin/nologin {name}) or pass --run-as USER"
        ) from None
    if pw.pw_uid == 0 or pw.pw_gid == 0:
        raise WorkerConfigError(f"--run-as {name}: uid/gid 0 is root; actions need an unprivileged user")
    return RunAs(name, pw.pw_uid, pw.pw_gid)


def isolation_from_args(args: argparse.Namespace) -> Isolation:
    mode = IsolationMode(args.isolation)
    if mode is IsolationMode.BWRAP:
        for tool in ("bwrap", "prlimit"):
            if shutil.which(tool) is None:
                pkg = "bubblewrap" if tool == "bwrap" else "util-linux"
                raise WorkerConfigError(f"--isolation bwrap needs {tool} (Debian package {pkg}), not on PATH")
    limits = Limits(args.wall_time, args.cpu_time, args.memory, args.file_size, args.max_procs, args.tmp_size,
                    args.max_stream_bytes, args.max_input_nodes, args.max_input_bytes, args.max_input_depth,
                    args.max_outputs, args.max_output_bytes, args.min_free_disk, args.min_free_inodes)
    return Isolation(mode, limits, _run_as(args), DEFAULT_RO_PATHS + tuple(args.ro_path), base_root=_base_root(args))


def _sandbox_base(args: argparse.Namespace) -> Path:
    given = args.sandbox_dir or args.work_dir / "sandboxes"
    try:
        base: Path = given.resolve()
        base.mkdir(mode=0o711, parents=True, exist_ok=True)
    except (OSError, RuntimeError) as e:  # RuntimeError: pathlib's symlink loop
        flag = "--sandbox-dir" if args.sandbox_dir else "--work-dir"
        raise WorkerConfigError(f"{flag} {shown(given)}: {reason(e) if isinstance(e, OSError) else e}") from None
    _check_private(base, "--sandbox-dir" if args.sandbox_dir else "--work-dir")
    return base


def _check_work_dirs(args: argparse.Namespace) -> None:
    """--work-dir and the file cache, made when missing and checked as the sandbox directory is: the worker writes
    session files, chmods and hands out cached inputs there as its own user."""
    for path, flag in ((args.work_dir, "--work-dir"),
                       (args.file_cache or args.work_dir / "file-cache", "--file-cache" if args.file_cache else
                        "--work-dir")):
        try:
            path.mkdir(mode=0o755, parents=True, exist_ok=True)  # the runner searches WORK-DIR/sandboxes
            real = path.resolve()
        except (OSError, RuntimeError) as e:
            raise WorkerConfigError(f"{flag} {shown(path)}: {reason(e) if isinstance(e, OSError) else e}") from None
        _check_private(real, flag)


def _check_private(path: Path, flag: str) -> None:
    """The worker creates, chmods and removes boxes below PATH as its own user (root, usually): refused unless no
    other user can change PATH or replace a directory above it (a directory planted in /tmp under a name the
    worker will use would make it remove whatever that directory's links lead to)."""
    why = safefs.unsafe_dir(path)
    if why is not None:
        raise WorkerConfigError(f"{flag} {shown(path)}: {why}; the worker removes and creates files there, so only "
                                "its own user may be able to change it")


def _check_isolation(args: argparse.Namespace) -> Isolation:
    """The configured isolation, probed once (/usr/bin/true in the sandbox); WorkerConfigError when it fails."""
    iso = isolation_from_args(args)
    why = probe(iso, _sandbox_base(args))
    if why is not None:
        user = f" as {iso.run_as.name}" if iso.run_as else ""
        raise WorkerConfigError(
            f"--isolation {iso.mode.value} does not work here{user}: {why} (the runner user must be able to search "
            "every parent of --sandbox-dir; --isolation none is for debugging only)"
        )
    if iso.note:
        print(f"goma-ext worker: WARNING: {iso.note}", file=sys.stderr, flush=True)
    return iso


def _remote(args: argparse.Namespace) -> RemoteConfig:
    """The worker's connection settings; its token file and client key checked (a refused one is one line and an
    exit, before any child starts, not a bot session retried for ever)."""
    cfg = load_config({"endpoint": args.remote, "instance": args.instance, "ca_file": args.ca_file,
                       "client_cert": args.client_cert, "client_key": args.client_key}, os.environ)
    if cfg is None:
        raise RemoteConfigError("worker needs --remote")
    check_secrets(cfg, Path.cwd())
    return cfg


def _serve_one(args: argparse.Namespace, cfg: RemoteConfig) -> int:
    bot_id = f"{args.bot_id}-{args.index}"
    _check_work_dirs(args)
    sandboxes = _sandbox_base(args) / bot_id
    allow = Allowlist.from_programs(_compilers(args), args.input_programs)
    s = WorkerSettings(
        cfg, bot_id, allow, args.work_dir / bot_id, isolation_from_args(args), sandboxes,
        file_cache=FileCache(args.file_cache or args.work_dir / "file-cache", args.file_cache_size),
        offer=_offer(args),
    )
    try:
        s.work_dir.mkdir(parents=True, exist_ok=True)
        sandboxes.mkdir(mode=0o711, exist_ok=True)
        _check_private(sandboxes, "--sandbox-dir" if args.sandbox_dir else "--work-dir")
        os.chmod(sandboxes, 0o711)
        stale_sandboxes = list(sandboxes.iterdir())
    except OSError as e:
        raise GomaExtError(f"--work-dir {shown(args.work_dir)}: {reason(e)}") from e
    for stale in stale_sandboxes:  # left by a killed predecessor with this bot id
        remove_box(stale)
    if s.file_cache is not None and s.file_cache.root.stat().st_dev != sandboxes.stat().st_dev:
        print(f"goma-ext worker: WARNING: --file-cache {shown(s.file_cache.root)} is on another file system than "
              f"{shown(sandboxes)}: inputs are copied from it, not hard-linked", file=sys.stderr, flush=True)
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
        [sys.executable, "-P", "-m", "goma_ext.cli", *sys.argv[sys.argv.index("worker") :]]
        if "worker" in sys.argv else None
    )
    if base is None:
        base = [
            sys.executable,
            "-P",  # not the working directory first on the module path (see procs.spawn)
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
    if args.remote is None or args.work_dir is None:
        raise WorkerConfigError("worker needs --remote URL and --work-dir DIR (or: goma-ext worker base-root DIR)")
    _offer(args)  # a bad --platform stops the start, not each child
    cfg = _remote(args)  # nor do bad settings or a refused secret
    if args.count < 1:
        raise GomaExtError(f"--count {args.count}: run at least one worker")
    # The host name here rather than as the option's default: --help and the reference are the same on every host.
    args.bot_id = args.bot_id or socket.gethostname()
    if args.index is not None:
        return _serve_one(args, cfg)
    _check_work_dirs(args)
    _check_isolation(args)  # once, before any child: refuse to start rather than run unisolated
    return _supervise(args)
