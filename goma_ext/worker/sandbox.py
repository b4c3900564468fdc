"""How an action's process runs: in a bubblewrap sandbox as an unprivileged uid under rlimits, or (debugging) bare.

Why bubblewrap (Debian's `bubblewrap`, not setuid): it is what BuildGrid's buildbox-run-bubblewrap and Flatpak
use, it sets up every namespace we need in one exec (mount, pid, net, ipc, uts, cgroup, user), dies with its
parent, and reports through --json-status-fd whether the command ran at all. Calling unshare(2)/mount(2) from
this multi-threaded Python worker would need a helper process anyway (no safe preexec_fn with threads).

The uid is dropped BEFORE bwrap (Popen user=/group=/extra_groups=[], done in C after fork): `bwrap --uid` run
by root keeps uid 0 outside the sandbox. Limits are rlimits set by util-linux `prlimit` in front of bwrap (no
preexec_fn). RLIMIT_NPROC counts every process of the runner uid, so workers sharing one --run-as user share
that budget (give each worker its own user to separate them).

With a base root (`--base-root DIR`, made by `goma-ext worker base-root`), the sandbox's / is DIR read-only
instead of the host's system paths: hermetic actions then see only what DIR and their input root hold.

Uploaded programs and ETXTBSY: the worker writes an action's compiler (an input file) and then execs it. Each
worker process runs one lease at a time and materialises (every file written and closed) before it spawns, but
a second lease thread (a cancelled one still dying) or any other fork in this process can inherit a writable
descriptor of a file being written, and the kernel refuses to exec a file open for writing anywhere ("Text file
busy"). Buildbarn avoids this with a separate runner process; we retry the spawn once after a short pause, by
when the inheriting child has exec'd (its copy is close-on-exec) and the descriptor is gone.
"""

from __future__ import annotations

import enum
import errno
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from goma_ext.errors import GomaExtError
from goma_ext.reapi.errors import RemoteError
from goma_ext.worker.forklock import FORK_LOCK

GIB = 1 << 30
INPUT_ROOT = "/b"  # where the input root appears inside the sandbox (fixed: outputs do not depend on the host path)
TOOL_DIR = "/.gx/bin"  # argv[0] -> the allow-listed binary, found through PATH so argv[0] stays the action's
# What the allow-listed compilers need (Debian 12, merged /usr): /usr and the symlinks into it, ld.so.cache.
DEFAULT_RO_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache")
KILL_GRACE_S = 2.0
TEXT_BUSY_RETRY_S = 0.2  # ETXTBSY: how long to wait before the one retry (see the module docstring)
TEXT_BUSY = os.strerror(errno.ETXTBSY)  # "Text file busy", as bwrap's execvp failure line ends
# Where a base root needs mount points: bwrap cannot create them in a read-only /.
BASE_ROOT_MOUNT_POINTS = ("proc", "dev", "tmp", INPUT_ROOT.lstrip("/"))
WATCH_S = 0.05  # how often the watcher checks the deadline and the cancel flag
NOT_ISOLATED = "goma-ext worker: --isolation none: this action ran WITHOUT a sandbox (debugging only)"


class IsolationMode(enum.Enum):
    BWRAP = "bwrap"
    NONE = "none"


class SandboxError(GomaExtError):
    """The sandbox itself failed (bwrap could not set up, or the probe failed): never the action's fault."""


class Exhausted(GomaExtError):
    """The action passed a bound of the worker's and was killed (RESOURCE_EXHAUSTED)."""


class StreamTooLarge(Exhausted):
    """The action wrote more to stdout or stderr than the worker takes."""


class DiskLow(Exhausted):
    """The file system of the action's input root fell below the free space (or inodes) the worker keeps."""


class ExecFailed(GomaExtError):
    """The sandbox started but the action's program could not be executed (missing, wrong format, no loader)."""

    def __init__(self, message: str, text_busy: bool = False) -> None:
        super().__init__(message)
        self.text_busy = text_busy


SHM_BYTES = 64 << 20  # the sandbox's /dev/shm (POSIX shared memory and semaphores), a tmpfs like /tmp


@dataclass(frozen=True)
class Limits:
    """Per-action limits; 0 means unlimited. The first five are the action's rlimits and wall time; the rest bound
    what an action's inputs and outputs may cost the worker, checked before the work is spent."""

    wall_s: float = 600.0
    cpu_s: int = 600
    memory_bytes: int = 4 * GIB  # RLIMIT_AS: clang maps libLLVM (~150 MB) and more; big links need GiBs
    file_size_bytes: int = 4 * GIB
    processes: int = 512  # RLIMIT_NPROC counts threads too (lld runs one per core)
    tmp_bytes: int = 1 * GIB  # the sandbox's /tmp, a tmpfs: memory the address-space limit does not count
    stream_bytes: int = 64 << 20  # stdout and stderr, each: past it the action is killed (the worker reads them)
    input_nodes: int = 500_000  # entries of the input tree once expanded (files, directories, symlinks)
    input_bytes: int = 32 * GIB  # file bytes of the input tree once expanded
    input_depth: int = 64
    outputs: int = 10_000  # declared output paths
    output_bytes: int = 16 * GIB  # the outputs found, together
    # What the sandboxes' file system keeps free while an action runs (/b is on it, and a file's size is the only
    # other bound): an action that takes it below is killed, before the host's other users of that disk suffer
    free_disk_bytes: int = 1 * GIB
    free_inodes: int = 10_000


@dataclass(frozen=True)
class RunAs:
    """The unprivileged user actions run as when the worker is root."""

    name: str
    uid: int
    gid: int


@dataclass(frozen=True)
class Isolation:
    mode: IsolationMode
    limits: Limits
    run_as: RunAs | None  # None: the worker's own (non-root) uid
    ro_paths: tuple[str, ...] = DEFAULT_RO_PATHS
    bwrap: str = "bwrap"
    prlimit: str = "prlimit"
    base_root: Path | None = None  # the sandbox's / (read-only) instead of the host's `ro_paths`

    @property
    def note(self) -> str:
        """What every lease result must say about this isolation ('' when sandboxed)."""
        return NOT_ISOLATED if self.mode is IsolationMode.NONE else ""


@dataclass(frozen=True)
class Completed:
    exit_code: int
    stdout: bytes
    stderr: bytes


def _limit(v: float) -> str:
    return str(int(v)) if v else "unlimited"


def prlimit_argv(iso: Isolation) -> list[str]:
    lim = iso.limits
    cpu = f"{lim.cpu_s}:{lim.cpu_s + 1}" if lim.cpu_s else "unlimited"  # soft -> SIGXCPU, a clear exit status
    return [
        iso.prlimit, f"--cpu={cpu}", f"--as={_limit(lim.memory_bytes)}", f"--fsize={_limit(lim.file_size_bytes)}",
        f"--nproc={_limit(lim.processes)}", "--",
    ]


def _ro_args(paths: Sequence[str]) -> list[str]:
    args: list[str] = []
    for p in paths:
        if os.path.islink(p):
            args += ["--symlink", os.readlink(p), p]
        elif os.path.exists(p):
            args += ["--ro-bind", p, p]
    return args


def bwrap_argv(
    iso: Isolation, argv: Sequence[str], exe: Path | None, root: Path, workdir: str, env: Mapping[str, str],
    status_fd: int,
) -> list[str]:
    """The bwrap command line: read-only system paths (or the base root as /), private /tmp, the input root the
    only writable place. `exe` serves a bare-name argv[0] (an allow-listed host compiler); None runs argv[0] as
    it is (a program in the input root, or a path inside the sandbox)."""
    inner_wd = os.path.normpath(os.path.join(INPUT_ROOT, workdir))
    # --disable-userns (which needs --unshare-user, not --unshare-all's -try): no user namespace of the action's own,
    # in which it would hold CAP_SYS_ADMIN over mounts and namespaces, the kernel's largest surface for an escape
    args = [iso.bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
    args += ["--ro-bind", str(iso.base_root), "/"] if iso.base_root else _ro_args(iso.ro_paths)
    tmp_size = ["--size", str(iso.limits.tmp_bytes)] if iso.limits.tmp_bytes else []
    args += ["--proc", "/proc", "--dev", "/dev", *tmp_size, "--tmpfs", "/tmp"]  # /tmp: private, bounded
    # --dev's /dev is a tmpfs the action could fill (half the RAM, beyond --memory's reach): read-only, with a small
    # /dev/shm of its own (the devices stay writable: they are bind mounts of the host's /dev/null and the like)
    args += ["--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    if exe is not None and not any(exe.is_relative_to(p) for p in iso.ro_paths if not os.path.islink(p)):
        args += ["--ro-bind", str(exe), str(exe)]  # an allow-listed program outside the system paths
    args += ["--bind", str(root), INPUT_ROOT]
    if exe is not None:
        args += ["--symlink", str(exe), f"{TOOL_DIR}/{argv[0]}"]
    args += ["--chdir", inner_wd, "--clearenv"]
    for k, v in sorted(env.items()):
        if k != "PATH":
            args += ["--setenv", k, v]
    path = env.get("PATH", "/usr/bin:/bin")
    args += ["--setenv", "PATH", f"{TOOL_DIR}:{path}" if exe is not None else path]
    args += ["--remount-ro", "/", "--json-status-fd", str(status_fd), "--", *argv]
    return args


def _popen_user(iso: Isolation) -> dict[str, object]:
    if iso.run_as is None:
        return {}
    return {"user": iso.run_as.uid, "group": iso.run_as.gid, "extra_groups": []}


def _kill(proc: subprocess.Popen[bytes], sig: int) -> None:
    if proc.returncode is not None:  # reaped: its pid may belong to someone else now
        return
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _wait(proc: subprocess.Popen[bytes], timeout: float, cancel: threading.Event | None,
          over: Callable[[], str] = lambda: "") -> str:
    """Wait for proc; past `timeout`, once `cancel` is set, or once `over()` names a bound the action passed, SIGTERM
    it, then SIGKILL after a grace period (bwrap's PID namespace dies with it). Returns "" when it ended by itself,
    else "timeout", "cancelled" or what `over()` said."""
    finished = threading.Event()
    deadline = time.monotonic() + timeout if timeout else None
    why: list[str] = []

    def watch() -> None:
        while not finished.wait(WATCH_S):
            if cancel is not None and cancel.is_set():
                why.append("cancelled")
            elif deadline is not None and time.monotonic() >= deadline:
                why.append("timeout")
            elif passed := over():
                why.append(passed)
            else:
                continue
            _kill(proc, signal.SIGTERM)
            try:
                proc.wait(KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                _kill(proc, signal.SIGKILL)
            return

    # The caller blocks in waitpid (no polling delay on completion); the watcher ends as soon as proc does.
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        proc.wait()
    except BaseException:
        _kill(proc, signal.SIGKILL)
        proc.wait()
        raise
    finally:
        finished.set()
    watcher.join()
    return why[0] if why else ""


def _status_records(status: bytes) -> Iterator[dict[str, Any]]:
    """The JSON objects of bwrap's --json-status-fd, a line each (other lines skipped)."""
    for line in status.splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc


def _command_ran(status: bytes) -> bool:
    """bwrap writes an exit-code record only when the command itself ran (the command can add lines: only the
    absence of any record counts, as 'the sandbox failed to start')."""
    return any("exit-code" in doc for doc in _status_records(status))


def _child_pid(status: bytes) -> int | None:
    """The sandbox's init (PID 1 inside it) as the worker sees it: bwrap's first status record."""
    return next((int(doc["child-pid"]) for doc in _status_records(status) if isinstance(doc.get("child-pid"), int)),
                None)


def _await_empty(status: bytes, timeout: float = KILL_GRACE_S) -> None:
    """After bwrap was killed (a timeout, a cancel, a stream too large), wait until the sandbox's processes are gone:
    its init dies with bwrap (--die-with-parent) and the kernel kills and reaps every other process of its PID
    namespace before the init itself ends, but not before bwrap's own exit, which is what the worker waited for. Until
    then the action's processes still write in its root, which the worker is about to remove as root. (A PID reused
    meanwhile costs this wait, never a wrong result: the removal follows no link and stays on its file system.)"""
    pid = _child_pid(status)
    if pid is None:
        return
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone, and reaped
        return
    try:
        select.select([fd], [], [], timeout)  # readable once it has ended
    finally:
        os.close(fd)


def _read_all(fd: int) -> bytes:
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks)


def _read_capped(f: IO[bytes], cap: int) -> bytes:
    f.seek(0)
    return f.read(cap) if cap else f.read()


def _args_fd(args: Sequence[str]) -> int:
    """An anonymous file holding bwrap's options, NUL-separated, for `bwrap --args FD`: the sandbox's paths and the
    action's environment never appear on a command line (/proc/PID/cmdline is readable by every local user; the
    action's own argv is, as any process's)."""
    if any("\0" in a for a in args):  # it would end one option and start another (lease.py refuses them first)
        raise ValueError("a bwrap option holds a NUL byte")
    fd = os.memfd_create("bwrap-args", os.MFD_CLOEXEC)
    data = b"".join(a.encode() + b"\0" for a in args)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _tool(name: str) -> str:
    """An absolute path for a tool named on PATH (bwrap runs with an empty environment, so no PATH search)."""
    return name if os.path.isabs(name) else shutil.which(name) or name


MEMORY_SIGNS = (b"out of memory", b"Cannot allocate memory", b"failed to map segment", b"bad_alloc")


def _limit_note(iso: Isolation, code: int, stderr: bytes) -> bytes:
    """A line naming the limit a failed action most likely hit (signals are certain, messages a hint)."""
    lim = iso.limits
    note = ""
    if code == 128 + signal.SIGXCPU:
        note = f"the action exceeded its CPU time limit ({lim.cpu_s} s; SIGXCPU)"
    elif code == 128 + signal.SIGXFSZ:
        note = f"the action exceeded its file size limit ({lim.file_size_bytes} bytes; SIGXFSZ)"
    elif code and lim.memory_bytes and any(s in stderr for s in MEMORY_SIGNS):
        note = f"the action may have hit its memory limit ({lim.memory_bytes >> 20} MiB of address space)"
    elif code and lim.processes and b"Resource temporarily unavailable" in stderr:
        note = f"the action may have hit its process limit ({lim.processes} for its uid)"
    return f"goma-ext worker: {note}\n".encode() if note else b""


def run(
    iso: Isolation, argv: Sequence[str], exe: Path | None, root: Path, workdir: str, env: Mapping[str, str],
    timeout: float, spool: Path, cancel: threading.Event | None = None,
) -> Completed:
    """Run argv (argv[0] served by `exe`, or run as it is when None) in workdir under root; stdout/stderr go
    through unnamed files in `spool` (a directory only the worker can write). Raises RemoteError(DEADLINE_EXCEEDED)
    past `timeout`, RemoteError(CANCELLED) once `cancel` is set, StreamTooLarge when stdout or stderr passed the
    limit, DiskLow when root's file system fell below the free space or inodes the worker keeps, ExecFailed when
    the program could not be executed (after one retry on ETXTBSY), SandboxError when bwrap could not start the
    command."""
    try:
        return _run_once(iso, argv, exe, root, workdir, env, timeout, spool, cancel)
    except ExecFailed as e:
        if not e.text_busy:
            raise
    time.sleep(TEXT_BUSY_RETRY_S)
    return _run_once(iso, argv, exe, root, workdir, env, timeout, spool, cancel)


def _free(root: Path) -> tuple[int, int] | None:
    """Free bytes and inodes (unprivileged users' share) of ROOT's file system; None for one that counts neither
    (ramfs, a tmpfs of size 0, some FUSE file systems report 0 blocks) or cannot be asked. Inodes: -1 when it
    does not count them (btrfs)."""
    try:
        fs = os.statvfs(root)
    except OSError:
        return None
    if not fs.f_blocks:
        return None
    return fs.f_bavail * fs.f_frsize, fs.f_favail if fs.f_files else -1


def _disk_low(root: Path, limits: Limits, before: tuple[int, int] | None) -> str:
    """Why the action should stop: ROOT's file system is below the free space or inodes LIMITS keep, and has less
    than when the action started (BEFORE: a disk that was already low, filled by someone else, kills no action that
    writes nothing); "" otherwise."""
    now = _free(root)
    if now is None or before is None:
        return ""
    (free, inodes), (free_before, inodes_before) = now, before
    if limits.free_disk_bytes and free < limits.free_disk_bytes and free < free_before:
        return (f"the worker's disk has {free >> 20} MiB free, less than the {limits.free_disk_bytes >> 20} MiB it "
                "keeps (--min-free-disk)")
    if limits.free_inodes and 0 <= inodes < limits.free_inodes and inodes < inodes_before:
        return (f"the worker's disk has {inodes} free inodes, fewer than the {limits.free_inodes} it keeps "
                "(--min-free-inodes)")
    return ""


def _exec_failure(stderr: bytes) -> ExecFailed | None:
    """bwrap's own line when it could not exec the command (`bwrap: execvp PROGRAM: REASON`)."""
    lines = stderr.decode(errors="replace").strip().splitlines()
    last = lines[-1] if lines else ""
    if not last.startswith("bwrap: execvp "):
        return None
    why = last.removeprefix("bwrap: ")
    return ExecFailed(f"cannot execute the program in the sandbox: {why}", text_busy=why.endswith(TEXT_BUSY))


def _run_once(
    iso: Isolation, argv: Sequence[str], exe: Path | None, root: Path, workdir: str, env: Mapping[str, str],
    timeout: float, spool: Path, cancel: threading.Event | None = None,
) -> Completed:
    status_r, status_w = os.pipe()
    args_fd = -1
    cap = iso.limits.stream_bytes
    try:
        if iso.mode is IsolationMode.BWRAP:
            inner = bwrap_argv(iso, argv, exe, root, workdir, env, status_w)
            split = len(inner) - len(argv) - 1  # the "--" before argv (a variable may be "--" too): bwrap takes
            # options from the file, the command from its own argv
            args_fd = _args_fd(inner[1:split])
            bwrap = [_tool(inner[0]), "--args", str(args_fd), *inner[split:]]
            cmd = [_tool(iso.prlimit), *prlimit_argv(iso)[1:], *bwrap]
            # bwrap's own environment is empty: its init (PID 1 in the sandbox, whose /proc/1/environ the action
            # can read) must not carry the worker's HOME or settings
            popen_kw: dict[str, object] = {"pass_fds": (status_w, args_fd), "env": {}}
        elif exe is None:
            raise SandboxError("--isolation none never runs a program that is not an allow-listed host compiler")
        else:
            cmd = list(argv)  # debugging only: no sandbox, no rlimits; argv[0] kept, `exe` runs
            popen_kw = {"executable": str(exe), "cwd": root / workdir, "env": dict(env)}
        # stdout and stderr: unnamed files in the worker's own directory (nothing at a path for anyone to open)
        before = _free(root)
        with tempfile.TemporaryFile(dir=spool) as out, tempfile.TemporaryFile(dir=spool) as err:

            def over() -> str:
                for name, f in (("stdout", out), ("stderr", err)):
                    if cap and os.fstat(f.fileno()).st_size > cap:
                        return name
                return _disk_low(root, iso.limits, before)

            with FORK_LOCK:  # held until the child has exec'd: it inherits no fd a writer has open (ETXTBSY)
                proc = subprocess.Popen(  # type: ignore[call-overload]  # the keyword set depends on the mode
                    cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True, close_fds=True,
                    **popen_kw, **_popen_user(iso),
                )
            os.close(status_w)
            status_w = -1
            stopped = _wait(proc, timeout, cancel, over)
            stdout, stderr = _read_capped(out, cap), _read_capped(err, cap)
        status = _read_all(status_r)
        if stopped and iso.mode is IsolationMode.BWRAP:
            _await_empty(status)
    finally:
        os.close(status_r)
        for fd in (status_w, args_fd):
            if fd >= 0:
                os.close(fd)
    if stopped == "timeout":
        raise RemoteError(f"action exceeded its {timeout:.0f} s timeout", temporary=True, code="DEADLINE_EXCEEDED")
    if stopped == "cancelled":
        raise RemoteError("action cancelled; every process of it was killed", temporary=True, code="CANCELLED")
    if stopped in ("stdout", "stderr"):
        raise StreamTooLarge(f"the action wrote more than {cap} bytes to its {stopped} (the worker's "
                             "--max-stream-bytes) and was killed")
    if stopped:
        raise DiskLow(f"the action was killed: {stopped}")
    if iso.mode is IsolationMode.BWRAP and not _command_ran(status):
        failed = _exec_failure(stderr)
        if failed is not None:
            raise failed
        why = stderr.decode(errors="replace").strip().splitlines()
        raise SandboxError(f"the sandbox failed to start (bwrap exit {proc.returncode}): {why[-1] if why else '?'}")
    code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    stderr += _limit_note(iso, code, stderr)
    return Completed(code, stdout, stderr)
