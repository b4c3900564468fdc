"""The proxy process: a selector reads requests (listener.py), a small pool answers them, a bounded pool acts."""

from __future__ import annotations

import base64
import os
import resource
import socket
import sys
import threading
import time
import traceback
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from goma_ext.errors import GomaExtError
from goma_ext.proxy import frames, validate
from goma_ext.proxy.limits import Limits
from goma_ext.proxy.listener import Connection, Listener
from goma_ext.proxy.shared import ActionAnswer, SharedRemote
from goma_ext.reapi.errors import InputError
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig

SEND_TIMEOUT_S = 10.0  # a client that does not read its answer for this long loses it
REQUEST_THREADS = 8  # decode, validate, answer: short work; actions run on their own pool
DRAIN_TIMEOUT_S = 900.0
FD_SPARE = 256  # descriptors beyond the connection cap: the gRPC channel, hashed files, logs


def _log(line: str) -> None:
    sys.stderr.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} goma-ext proxy[{os.getpid()}]: {line}\n")
    sys.stderr.flush()


def _one_line(text: str, limit: int = 300) -> str:
    """A message from the client's data as one bounded log/refusal line."""
    text = text.replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[:limit] + "…"


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


_WAIT_FRAME = frames.encode({"type": wire.WAIT})


GRPC_WAIT_S = 5.0  # how often a thread blocked in a gRPC call wakes up to look (grpc's own default: 0.1 s)


def quiet_grpc_waits() -> None:
    """Let threads blocked in gRPC calls sleep until there is something to read.

    grpc's Python layer wakes every thread that waits on a call (a stream's next message, a unary answer) every
    grpc._common.MAXIMUM_WAIT_TIMEOUT (0.1 s), so that a signal reaches the main thread soon
    (https://github.com/grpc/grpc/issues/19464). The proxy's gRPC calls all wait in worker threads, up to 256 of them
    on Execute streams that last a remote compile each: ten wake-ups a second each were most of its CPU on a clean
    build's mix (docs/benchmarks.md, "Proxy shards"). A missing constant (another grpc) only loses the saving."""
    import grpc._common as grpc_common

    if isinstance(getattr(grpc_common, "MAXIMUM_WAIT_TIMEOUT", None), float):
        grpc_common.MAXIMUM_WAIT_TIMEOUT = GRPC_WAIT_S
    else:
        _log("grpc._common.MAXIMUM_WAIT_TIMEOUT not found: blocked gRPC calls wake every 0.1 s")


def fit_descriptors(max_connections: int) -> int:
    """Raise the soft descriptor limit for max_connections (up to the hard limit); the cap that fits."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max_connections + FD_SPARE
    if soft != resource.RLIM_INFINITY and soft < want:
        soft = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    if soft == resource.RLIM_INFINITY:
        return max_connections
    return max(1, min(max_connections, soft - FD_SPARE))


class Proxy:
    """One endpoint's proxy: the listening socket, the shared remote state and the lifecycle."""

    def __init__(self, cfg: RemoteConfig, key: str, sock_path: Path, idle_s: float, limits: Limits,
                 shard: int = 0) -> None:
        self.cfg = cfg
        self.key = key
        self.shard = shard
        self.sock_path = sock_path
        self.idle_s = idle_s
        self.shared = SharedRemote(cfg)
        self.pool = ThreadPoolExecutor(limits.max_active, thread_name_prefix="action")
        self.requests = ThreadPoolExecutor(REQUEST_THREADS, thread_name_prefix="request")
        self.counts: Counter[str] = Counter()
        self.version = wire.version_tag()
        self.started = time.monotonic()
        self._lock = threading.Lock()
        self._active = 0
        self._peak = 0
        self._last = time.monotonic()
        self._stopping = threading.Event()
        self._waiting: dict[Connection, bool] = {}  # runs in flight: connection -> still listening
        max_connections = fit_descriptors(limits.max_connections)
        if max_connections < limits.max_connections:
            _log(f"descriptor limit allows {max_connections} connections, not {limits.max_connections}")
        self.listener = Listener(os.fspath(sock_path), max_connections, limits.request_timeout_s,
                                 self._on_request, self._refuse, _log)
        self.inode = os.stat(sock_path).st_ino

    # lifecycle

    def serve(self) -> None:
        quiet_grpc_waits()
        threading.Thread(target=self._watch_idle, name="idle", daemon=True).start()
        threading.Thread(target=self._warm_up, name="warm-up", daemon=True).start()
        threading.Thread(target=self._heartbeats, name="heartbeat", daemon=True).start()
        _log(f"serving {self.cfg.endpoint} (shard {self.shard}) on {self.sock_path} (version {self.version}, "
             f"idle timeout {self.idle_s:.0f} s, at most {self.listener.max_connections} connections, requests within "
             f"{self.listener.request_timeout_s:g} s)")
        self.listener.serve()
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
        self.listener.shutdown()

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

    def _heartbeats(self) -> None:
        """A `wait` frame a second to each client whose action is in flight; one whose socket is full (it does
        not read) gets no more of them, and no thread waits on it."""
        while True:
            time.sleep(wire.HEARTBEAT_S)
            with self._lock:
                listening = [conn for conn, yes in self._waiting.items() if yes]
            for conn in listening:
                if not self._send_nowait(conn, _WAIT_FRAME):
                    with self._lock:
                        if conn in self._waiting:
                            self._waiting[conn] = False

    def _send_nowait(self, conn: Connection, data: bytes) -> bool:
        with conn.lock:
            if conn.closed:
                return False
            try:
                sent = conn.sock.send(data, socket.MSG_DONTWAIT)
                if sent < len(data):  # rare: finish the frame (bounded by the send timeout) so the stream stays whole
                    conn.sock.sendall(data[sent:])
                    return False
                return True
            except OSError:
                return False

    # requests

    def _on_request(self, conn: Connection, body: bytes) -> None:
        """Called by the listener with a complete frame: the work goes to the request pool."""
        self.requests.submit(self._request, conn, body)

    def _request(self, conn: Connection, body: bytes) -> None:
        keep = False
        try:
            conn.sock.settimeout(SEND_TIMEOUT_S)
            keep = self._dispatch(conn, body)
        except Exception as e:  # a bug must not take the proxy down, nor print a traceback per client
            with self._lock:
                self.counts["internal_errors"] += 1
            _log(f"internal error on a request of pid {conn.pid}: {_one_line(repr(e))}")
            self._send(conn, {"type": wire.ERROR, "message": f"proxy internal error: {_one_line(repr(e))}"})
        finally:
            if not keep:
                conn.close()

    def _dispatch(self, conn: Connection, body: bytes) -> bool:
        """Answer one request; True when an action now owns the connection."""
        try:
            msg = frames.decode(body)
        except wire.FrameError as e:
            self._refuse(conn, f"unreadable request: {e}")
            return False
        op = msg.get("op")
        with self._lock:
            self._last = time.monotonic()
        if op == "ping":
            self._send(conn, {"type": wire.RESULT, "version": self.version, "pid": os.getpid()})
        elif op == "status":
            self._send(conn, {"type": wire.RESULT, **self.status()})
        elif op == "stop":
            self._send(conn, {"type": wire.RESULT, "pid": os.getpid()})
            self.stop(f"asked by pid {conn.pid}")
        elif op == "run":
            if msg.get("version") != self.version:
                self.stop(f"client pid {conn.pid} speaks version {_one_line(repr(msg.get('version')), 80)}; "
                          "making way for its proxy")
                self._send(conn, {"type": wire.MISMATCH, "version": self.version})
                return False
            return self._run(conn, msg)
        else:
            self._refuse(conn, f"unknown op {op!r}")
        return False

    def _send(self, conn: Connection, frame: Mapping[str, Any]) -> bool:
        return self._send_now(conn, frames.encode(frame))

    def _send_now(self, conn: Connection, data: bytes) -> bool:
        with conn.lock:
            if conn.closed:
                return False
            try:
                conn.sock.sendall(data)
                return True
            except OSError:
                return False

    def _refuse(self, conn: Connection, why: str) -> None:
        why = _one_line(why)
        with self._lock:
            self.counts["refused"] += 1
        _log(f"bad request from pid {conn.pid}: {why}")
        frame = frames.encode({"type": wire.REFUSED, "message": why})
        if conn.sock.gettimeout() == 0.0:  # still the listener's: a refusal must not block it
            self._send_nowait(conn, frame)
        else:
            self._send_now(conn, frame)

    def _run(self, conn: Connection, msg: Mapping[str, Any]) -> bool:
        try:
            req = validate.run_request(msg, self.shared.digests, self.key)
        except validate.Refusal as e:
            self._refuse(conn, str(e))
            return False
        except (ValueError, TypeError, RecursionError) as e:  # e.g. a lone surrogate in a path
            self._refuse(conn, f"malformed request: {e}")
            return False
        with self._lock:
            self.counts["runs"] += 1
            self._active += 1
            self._peak = max(self._peak, self._active)
            self._waiting[conn] = True
        done: Future[ActionAnswer] = self.pool.submit(self.shared.run, req)
        done.add_done_callback(lambda f: self.requests.submit(self._finish, conn, f))
        return True

    def _finish(self, conn: Connection, done: Future[ActionAnswer]) -> None:
        try:
            self._send(conn, self._final_frame(conn, done))
        finally:
            with self._lock:
                self._waiting.pop(conn, None)
                self._active -= 1
                self._last = time.monotonic()
            conn.close()

    def _final_frame(self, conn: Connection, done: Future[ActionAnswer]) -> dict[str, Any]:
        try:
            return _answer_frame(done.result())
        except InputError as e:
            why = _one_line(str(e))
            with self._lock:
                self.counts["refused"] += 1
            _log(f"bad request from pid {conn.pid}: {why}")
            return {"type": wire.REFUSED, "message": why}
        except GomaExtError as e:
            with self._lock:
                self.counts["remote_errors"] += 1
            return {"type": wire.ERROR, "message": str(e)}
        except Exception as e:  # one action's bug must not stop the proxy
            with self._lock:
                self.counts["internal_errors"] += 1
            _log(f"internal error on a request of pid {conn.pid}: {e!r}\n{traceback.format_exc()}")
            return {"type": wire.ERROR, "message": f"proxy internal error: {e!r}"}

    def status(self) -> dict[str, Any]:
        times = os.times()
        with self._lock:
            mine = {"active": self._active, "peak_active": self._peak, **self.counts}
        mine.update(self.listener.counters())
        return {
            "pid": os.getpid(), "version": self.version, "endpoint": self.cfg.endpoint, "instance": self.cfg.instance,
            "shard": self.shard,
            "uptime_s": round(time.monotonic() - self.started, 3), "cpu_s": round(times.user + times.system, 3),
            # CPU of child processes: stays 0, since the proxy executes nothing locally (the tests check it)
            "children_cpu_s": round(times.children_user + times.children_system, 3),
            **mine, **self.shared.counters(),
        }


