"""The step server's process (step_server.py is its command line, server_start.py starts it): accepting
launchers on the socket, one thread per step in flight, each running gn_thinlto.steps.backend.serve with the
compiler run by the launcher."""

from __future__ import annotations

import fcntl
import os
import queue
import resource
import select
import shutil
import socket
import stat
import struct
import sys
import threading
import time
from collections.abc import Sequence
from typing import TextIO

import thinlto_base
from gn_thinlto.steps import in_process_launcher
from gn_thinlto.steps.backend import Runner, prune_due, serve
from gn_thinlto.steps.in_process_launcher import InProcess
from gn_thinlto.steps.step_args import StepArgs, parse_args, serves
from gn_thinlto.steps.step_protocol import (
    Answer,
    Gone,
    Request,
    decode_request,
    read_frame,
    run_in_launcher,
    send_answer,
    send_exit,
)
from thinlto_base import notices
from thinlto_base.keys import BackendJob
from thinlto_base.store import CacheStore
from thinlto_base.trust import Trust

BACKEND_SCRIPT = os.path.join(os.path.dirname(os.path.realpath(__file__)), "backend.py")
CODE_DIRS = (os.path.dirname(BACKEND_SCRIPT), os.path.dirname(os.path.realpath(thinlto_base.__file__)),
             in_process_launcher.CODE_DIR)
REQUEST_TIMEOUT_S = 30.0  # for a connected launcher to send its request
CHECK_EVERY_S = 1.0  # how often the server looks at its socket and code while serving
MAX_ACTIVE = 4096  # steps in flight; beyond, a launcher is told to run the step itself
LOG_CAP = 1 << 20  # the server's log is emptied at start beyond this


def _still_connected(conn: socket.socket) -> None:
    """Raise Gone when the launcher has closed its end (it sends nothing unasked: readable means closed)."""
    poller = select.poll()
    poller.register(conn, select.POLLIN | select.POLLHUP | select.POLLERR)
    if poller.poll(0):
        raise Gone()


def _environment(items: Sequence[bytes]) -> dict[str, str]:
    """The launcher's environment from its NAME=VALUE strings."""
    env = {}
    for item in items:
        name, eq, value = os.fsdecode(item).partition("=")
        if eq:
            env[name] = value
    return env


def _same_program(name: str, launcher_path: str | None) -> bool:
    """Whether NAME (a program named without a path) is the same file on the launcher's PATH as on the server's:
    the step's cache key names the compiler the server finds."""
    theirs = shutil.which(name, path=launcher_path if launcher_path is not None else os.defpath)
    return theirs is not None and theirs == shutil.which(name)


class ThreadStderr:
    """sys.stderr for the server: what a step's code prints (one-line errors, cache warnings) is kept for the
    step's launcher, which prints it where ninja shows it; anything else goes to the server's log."""

    def __init__(self, log: TextIO) -> None:
        self._log = log
        self._local = threading.local()

    def capture(self) -> None:
        self._local.text = []

    def captured(self) -> str:
        text = "".join(getattr(self._local, "text", ()))
        self._local.text = None
        return text

    def write(self, text: str) -> int:
        kept = getattr(self._local, "text", None)
        if kept is not None:
            kept.append(text)
        else:
            self._log.write(text)
        return len(text)

    def flush(self) -> None:
        self._log.flush()

    def log(self, text: str) -> None:
        """TEXT to the server's log, whichever step this thread serves."""
        self._log.write(text)
        self._log.flush()


def _code_stamp() -> tuple[tuple[str, int, int], ...]:
    """The server's own code as (path, size, mtime) of its modules and the thin client's: a change means an
    upgrade."""
    stamp = []
    for d in CODE_DIRS:
        for name in sorted(os.listdir(d)):
            if name.endswith(".py"):
                st = os.stat(os.path.join(d, name))
                stamp.append((name, st.st_size, st.st_mtime_ns))
    return tuple(stamp)


class StepServer:
    """Serves the steps whose settings are STEP's on the Unix socket PATH (relative to the build directory,
    the working directory) until idle for IDLE_S seconds, its socket is gone or its code changed."""

    def __init__(self, path: str, step: StepArgs, idle_s: float, lock_fd: int = -1) -> None:
        self.path, self.step, self.idle_s = path, step, idle_s
        self.cwd = os.getcwd()
        st = os.stat(".")
        self._cwd_ident = (st.st_dev, st.st_ino)
        self._lock_fd = lock_fd  # the lock start_server took for this server, when it did
        self.max_active = MAX_ACTIVE
        self._queue: queue.SimpleQueue[socket.socket] = queue.SimpleQueue()
        self._scripts: dict[str, bool] = {}  # a request's step script: is it this server's backend.py?
        self._launchers: dict[tuple[str, ...], InProcess | None] = {}  # a remote launcher: its in-process entry
        self._idle_workers = 0
        self._sock: socket.socket | None = None
        self._ident: tuple[int, int] = (0, 0)
        self._code = _code_stamp()
        self._active = 0
        self._count = threading.Lock()
        self._idle_since = time.monotonic()
        self._requester = threading.local()
        self.stderr = ThreadStderr(sys.stderr)

    def log(self, message: str) -> None:
        self.stderr.log(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} [{os.getpid()}] {message}\n")

    def start(self) -> bool:
        """Take the socket's lock (unless start_server handed it over) and listen; False when another server
        holds the lock."""
        if self._lock_fd < 0:
            fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                return False
            self._lock_fd = fd
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # a descriptor per step in flight
        if soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self.max_active = min(MAX_ACTIVE, max(hard, soft) // 2)
        try:  # the server's log is its stderr (start_server)
            if os.fstat(2).st_size > LOG_CAP:
                os.ftruncate(2, 0)
        except OSError:
            pass
        try:  # a socket left by a server that died: nothing listens on it, since we hold the lock
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(self.path)
        finally:
            os.umask(old)
        sock.listen(512)
        try:
            st = os.lstat(self.path)
            self._ident = (st.st_dev, st.st_ino)
        except FileNotFoundError:  # removed since the bind: serve() leaves at its first look (_why_leave)
            self._ident = (0, 0)
        self._sock = sock
        sys.stderr = self.stderr
        notices.requester = self._requesting_pid
        self.log(f"serving {self.path} in {self.cwd}")
        return True

    def _requesting_pid(self) -> int:
        return getattr(self._requester, "pid", 0)

    def serve(self) -> None:
        """Accept launchers until it is time to leave, then let the steps in flight finish."""
        assert self._sock is not None
        self._sock.settimeout(CHECK_EVERY_S)
        checked = time.monotonic()
        reason = ""
        while not reason:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                conn = None
            except OSError as e:  # out of descriptors, a connection aborted: its launcher runs the step itself
                self.log(f"accept: {e}")
                time.sleep(0.1)
                conn = None
            if conn is not None:
                with self._count:
                    self._active += 1
                    idle = self._idle_workers > 0
                    self._idle_workers -= idle
                self._queue.put(conn)
                if not idle:  # a thread per step in flight, kept for the next ones (starting one costs ~0.1 ms)
                    threading.Thread(target=self._work, daemon=True).start()
            now = time.monotonic()
            if conn is None or now - checked >= CHECK_EVERY_S:
                checked = now
                reason = self._why_leave(now)
        self.log(f"leaving: {reason}")
        self._sock.close()
        if self._ours():
            os.unlink(self.path)
        while self._active:  # the steps in flight finish; their launchers wait for them
            time.sleep(0.05)
        os.close(self._lock_fd)

    def _ours(self) -> bool:
        try:
            st = os.lstat(self.path)
        except OSError:
            return False
        return (st.st_dev, st.st_ino) == self._ident

    def _why_leave(self, now: float) -> str:
        if not self._ours():
            return "the socket was removed or replaced"
        try:
            if _code_stamp() != self._code:
                return "the step code changed"
        except OSError:
            return "the step code is gone"
        with self._count:
            if self._active:
                self._idle_since = now
                return ""
        return f"idle for {self.idle_s:g} s" if now - self._idle_since >= self.idle_s else ""

    def _work(self) -> None:
        while True:  # until the process ends (daemon threads)
            self._handle(self._queue.get())
            with self._count:
                self._idle_workers += 1

    def _handle(self, conn: socket.socket) -> None:
        try:
            pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            if uid != os.geteuid():
                self.log(f"closed a connection from uid {uid} (pid {pid}): not this server's user")
                return
            conn.settimeout(REQUEST_TIMEOUT_S)
            frame = read_frame(conn)
            conn.settimeout(None)  # a compiler may run for long; a launcher that dies closes the connection
            send_answer(conn, Answer.TAKEN)
            self._requester.pid = pid
            self._step(conn, decode_request(frame))
        except (Gone, OSError):
            pass  # the launcher is gone: it ran the step itself or ninja stopped it
        except Exception as e:  # a bug here must not end the server: the launcher runs the step itself
            self.log(f"error: {type(e).__name__}: {e}")
        finally:
            conn.close()
            self._requester.pid = 0
            with self._count:
                self._active -= 1
                self._idle_since = time.monotonic()

    def _step(self, conn: socket.socket, request: Request | None) -> None:
        step = self._accepted(request)
        with self._count:
            busy = self._active > self.max_active
        if request is None or step is None or busy:
            send_answer(conn, Answer.FALL_BACK)
            return
        try:
            job = BackendJob.parse(step.command)
        except ValueError:
            send_answer(conn, Answer.FALL_BACK)  # the Python step says what is wrong
            return
        bare = os.sep not in job.argv[0]  # a compiler found on PATH
        env = _environment(request.environment) if step.launcher or bare else {}
        if bare and not _same_program(job.argv[0], env.get("PATH")):
            send_answer(conn, Answer.FALL_BACK)  # the launcher's PATH finds it elsewhere than the server's
            return
        store = CacheStore(step.cache, Trust(step.trust), warn_dir=os.path.dirname(os.fspath(step.log)))
        try:
            self.stderr.capture()
            try:  # a launcher gone mid-step raises Gone: the step has removed its temporaries on the way out
                runner = self._runner(conn)
                if step.launcher:
                    runner = self._launched(step.launcher, env, runner)
                rc, missed = serve(job, store, step.log, step.launcher, runner, lambda: _still_connected(conn))
            except (ValueError, OSError) as e:
                if isinstance(e, (BrokenPipeError, ConnectionError)):
                    raise Gone() from e
                print(f"gn-thinlto: error: backend: {e}", file=sys.stderr)
                rc, missed = 2, False
            finally:
                said = self.stderr.captured()
            send_exit(conn, rc, said)
            if rc == 0 and missed and store.root:
                prune_due(store, step.policy)  # after the answer: no step waits for it
        finally:
            store.close()

    def _accepted(self, request: Request | None) -> StepArgs | None:
        """The step REQUEST asks for, when this server serves it as the Python step would; else None."""
        if request is None:
            return None
        cwd, args = request.cwd, request.args
        script = next((i for i, a in enumerate(args) if a.endswith("/backend.py")), -1)
        if script != 2 or args[0] != sys.executable:
            return None
        ours = self._scripts.get(args[2])
        if ours is None:  # resolved once per spelling, not per step (an upgrade ends the server: _code_stamp)
            ours = self._scripts[args[2]] = os.path.realpath(args[2]) == BACKEND_SCRIPT
        if not ours:
            return None
        try:  # the same directory, whatever its path now (a build directory moved while its server runs)
            st = os.stat(cwd)
        except OSError:
            return None
        if (st.st_dev, st.st_ino) != self._cwd_ident:
            return None
        try:
            step = parse_args(args[3:])
        except ValueError:
            return None  # the step itself says what is wrong, in its own words
        if not serves(self.path, step.socket) or step.settings() != self.step.settings():
            return None
        return step

    def _launched(self, launcher: list[str], env: dict[str, str], forward: Runner) -> Runner:
        """The runner of a remote step's commands (LAUNCHER… -- COMMAND): the launcher's in-process entry in this
        process when it has one (goma-ext's thin client: see in_process_launcher), with the step launcher's ENV;
        else, or when that entry hands over (no proxy yet, a remote failure: the full client's cases), FORWARD
        (the step launcher runs the command itself, as the Python step would)."""
        entry = self._in_process(launcher)
        if entry is None:
            return forward

        def run(argv: list[str]) -> int:
            answered = entry(argv[3:], env) if argv[: len(launcher)] == launcher else None
            if answered is None:
                return forward(argv)
            code, stdout, stderr = answered
            if stdout or stderr:  # ninja shows a command's two streams as one
                sys.stderr.write(os.fsdecode(stdout + stderr))
            return code

        return run

    def _in_process(self, launcher: list[str]) -> InProcess | None:
        """in_process_launcher.entry(LAUNCHER), resolved once per spelling of its interpreter and script."""
        key = tuple(launcher[:3])
        if key not in self._launchers:  # two steps resolving it at once both find the same
            self._launchers[key] = in_process_launcher.entry(launcher)
        return self._launchers[key]

    def _runner(self, conn: socket.socket) -> Runner:
        return lambda argv: run_in_launcher(conn, argv)
