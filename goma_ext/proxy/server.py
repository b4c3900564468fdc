"""The proxy process: a Unix-socket server, one thread per connection, actions on a bounded pool."""

from __future__ import annotations

import base64
import os
import socket
import socketserver
import struct
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from goma_ext.errors import GomaExtError
from goma_ext.proxy import validate
from goma_ext.proxy.shared import ActionAnswer, SharedRemote
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.errors import InputError

DEFAULT_IDLE_S = 600.0
DEFAULT_MAX_ACTIVE = 256  # actions the proxy works on at once; more wait in its queue (clients get `wait`)
RECEIVE_TIMEOUT_S = 10.0
DRAIN_TIMEOUT_S = 900.0


def _log(line: str) -> None:
    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} goma-ext proxy[{os.getpid()}]: {line}\n")
    sys.stderr.flush()


def _peer(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the connecting process."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


def _answer_frame(answer: ActionAnswer) -> dict[str, Any]:
    return {
        "type": wire.RESULT,
        "exit_code": answer.exit_code,
        "stdout": base64.b64encode(answer.stdout).decode(),
        "stderr": base64.b64encode(answer.stderr).decode(),
        "mode": answer.mode,
        "bytes_uploaded": answer.bytes_uploaded,
        "input_bytes": answer.input_bytes,
        "phases": {k: round(v, 6) for k, v in answer.phases.items()},
    }


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 512


class Proxy:
    """One endpoint's proxy: the listening socket, the shared remote state and the lifecycle."""

    def __init__(self, cfg: RemoteConfig, key: str, sock_path: Path, idle_s: float, max_active: int) -> None:
        self.cfg = cfg
        self.key = key
        self.sock_path = sock_path
        self.idle_s = idle_s
        self.shared = SharedRemote(cfg)
        self.pool = ThreadPoolExecutor(max_active, thread_name_prefix="action")
        self.counts: Counter[str] = Counter()
        self.version = wire.version_tag()
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._active = 0
        self._peak = 0
        self._last = time.monotonic()
        self._stopping = threading.Event()
        proxy = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                proxy.handle(self.request)

        old = os.umask(0o177)  # the socket is created 0600: the user's alone from the first instant
        try:
            self.server = _Server(os.fspath(sock_path), Handler)
        finally:
            os.umask(old)
        os.chmod(sock_path, 0o600)
        self.inode = os.stat(sock_path).st_ino

    # lifecycle

    def serve(self) -> None:
        threading.Thread(target=self._watch_idle, name="idle", daemon=True).start()
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()
        _log(f"serving {self.cfg.endpoint} on {self.sock_path} (version {self.version}, idle timeout "
             f"{self.idle_s:.0f} s)")
        self.server.serve_forever(poll_interval=0.2)
        self.server.server_close()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        while self._active and time.monotonic() < deadline:
            time.sleep(0.05)
        self.shared.close()
        _log(f"stopped ({dict(self.counts)})")

    def stop(self, why: str) -> None:
        """Stop accepting (the socket file goes at once, so a new proxy can take its place), then drain."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        _log(f"stopping: {why}")
        self._unlink_own_socket()
        threading.Thread(target=self.server.shutdown, name="shutdown", daemon=True).start()

    def _unlink_own_socket(self) -> None:
        try:
            if os.stat(self.sock_path).st_ino == self.inode:
                self.sock_path.unlink()
        except OSError:
            pass

    def _warm_up(self) -> None:
        try:
            self.shared.connect()
        except GomaExtError as e:
            _log(f"cannot reach {self.cfg.endpoint} yet: {e}")

    def _watch_idle(self) -> None:
        while not self._stopping.wait(1.0):
            with self._lock:
                idle = not self._active and time.monotonic() - self._last > self.idle_s
            if idle:
                self.stop(f"idle for {self.idle_s:.0f} s")

    @contextmanager
    def _activity(self) -> Iterator[None]:
        with self._lock:
            self._active += 1
            self._peak = max(self._peak, self._active)
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                self._last = time.monotonic()

    # requests

    def handle(self, sock: socket.socket) -> None:
        pid, uid = _peer(sock)
        if uid != os.getuid():
            _log(f"refused a connection from uid {uid} (pid {pid})")
            return
        sock.settimeout(RECEIVE_TIMEOUT_S)
        try:
            if not sock.recv(1, socket.MSG_PEEK):
                return  # a liveness probe: connected and closed
            msg = wire.receive(sock, wire.MAX_REQUEST_BYTES)
        except (EOFError, OSError, wire.FrameError) as e:
            self._refuse(sock, pid, f"unreadable request: {e or type(e).__name__}")
            return
        op = msg.get("op")
        with self._lock:
            self._last = time.monotonic()
        if op == "ping":
            self._send(sock, {"type": wire.RESULT, "version": self.version, "pid": os.getpid()})
        elif op == "status":
            self._send(sock, {"type": wire.RESULT, **self.status()})
        elif op == "stop":
            self._send(sock, {"type": wire.RESULT, "pid": os.getpid()})
            self.stop(f"asked by pid {pid}")
        elif op == "run":
            if msg.get("version") != self.version:
                self.stop(f"client pid {pid} speaks version {msg.get('version')!r}; making way for its proxy")
                self._send(sock, {"type": wire.MISMATCH, "version": self.version})
                return
            self._run(sock, pid, msg)
        else:
            self._refuse(sock, pid, f"unknown op {op!r}")

    def _send(self, sock: socket.socket, frame: Mapping[str, Any]) -> bool:
        try:
            wire.send(sock, frame)
            return True
        except OSError:
            return False

    def _refuse(self, sock: socket.socket, pid: int, why: str) -> None:
        with self._lock:
            self.counts["refused"] += 1
        _log(f"bad request from pid {pid}: {why}")
        self._send(sock, {"type": wire.REFUSED, "message": why})

    def _run(self, sock: socket.socket, pid: int, msg: Mapping[str, Any]) -> None:
        try:
            req = validate.run_request(msg, self.shared.digests, self.key)
        except validate.Refusal as e:
            self._refuse(sock, pid, str(e))
            return
        with self._lock:
            self.counts["runs"] += 1
        with self._activity():
            done: Future[ActionAnswer] = self.pool.submit(self.shared.run, req)
            listening = True
            while True:
                try:
                    answer = done.result(timeout=wire.HEARTBEAT_S)
                except FutureTimeout:
                    listening = listening and self._send(sock, {"type": wire.WAIT})
                    continue
                except InputError as e:
                    self._refuse(sock, pid, str(e))
                    return
                except GomaExtError as e:
                    with self._lock:
                        self.counts["remote_errors"] += 1
                    self._send(sock, {"type": wire.ERROR, "message": str(e)})
                    return
                except Exception as e:  # one action's bug must not stop the proxy
                    with self._lock:
                        self.counts["internal_errors"] += 1
                    _log(f"internal error on a request of pid {pid}: {e!r}\n{traceback.format_exc()}")
                    self._send(sock, {"type": wire.ERROR, "message": f"proxy internal error: {e!r}"})
                    return
                break
        self._send(sock, _answer_frame(answer))

    def status(self) -> dict[str, Any]:
        times = os.times()
        with self._lock:
            mine = {"active": self._active, "peak_active": self._peak, **self.counts}
        return {
            "pid": os.getpid(), "version": self.version, "endpoint": self.cfg.endpoint, "instance": self.cfg.instance,
            "uptime_s": round(time.monotonic() - self.started, 3), "cpu_s": round(times.user + times.system, 3),
            # CPU of child processes: stays 0, since the proxy executes nothing locally (the tests check it)
            "children_cpu_s": round(times.children_user + times.children_system, 3),
            **mine, **self.shared.counters(),
        }


