"""The proxy's front door: one thread accepts connections and reads their request frames with a selector.

A thread per connection would let every open connection cost a thread: a ninja -j1000 build keeps about 1,000
connections open (each waits for its action), and 500 slowloris connections once held 508 threads. Here an open
connection costs a descriptor and its partial frame; a complete frame goes to the caller's bounded pool. Each
connection has until a deadline to deliver its whole request (one per connection); beyond the connection cap
a client gets a one-line refusal at once.
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from goma_ext.proxy.frames import FrameBuffer, encode
from goma_ext.remote import proxy_protocol as wire

READ_CHUNK = 1 << 16
BUSY_LOG_EVERY_S = 10.0  # at the connection cap, one log line per this period, not one per refused client


def peer(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the connecting process."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid


class Connection:
    """An accepted client: its socket, pid and, until its request is complete, the frame read so far."""

    __slots__ = ("_listener", "buffer", "closed", "deadline", "lock", "pid", "sock")

    def __init__(self, listener: Listener, sock: socket.socket, pid: int, deadline: float) -> None:
        self._listener = listener
        self.sock = sock
        self.pid = pid
        self.deadline = deadline
        self.buffer: FrameBuffer | None = FrameBuffer()
        self.lock = threading.Lock()  # one writer at a time: heartbeats and the final answer
        self.closed = False

    def close(self) -> None:
        """Close the socket and free the connection's slot (idempotent)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.sock.close()
        self._listener.released()


class Listener:
    """Accepts on a Unix socket (created 0600) and hands each complete request to on_request(connection, body)."""

    def __init__(self, path: str, max_connections: int, request_timeout_s: float,
                 on_request: Callable[[Connection, bytes], None], on_bad: Callable[[Connection, str], None],
                 log: Callable[[str], None]) -> None:
        self.max_connections = max_connections
        self.request_timeout_s = request_timeout_s
        self._on_request = on_request
        self._on_bad = on_bad
        self._log = log
        self._lock = threading.Lock()
        self.open = 0
        self.peak = 0
        self.busy_refused = 0
        self.timed_out = 0
        self._busy_logged = 0.0
        self._reading: deque[Connection] = deque()  # in accept order, which is deadline order
        self._stop = threading.Event()
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        old = os.umask(0o177)  # the socket is created 0600: the user's alone from the first instant
        try:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.bind(path)
            except OSError:
                self.sock.close()
                raise
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self.sock.listen(min(socket.SOMAXCONN, 4096))
        self.sock.setblocking(False)
        self._sel.register(self.sock, selectors.EVENT_READ, None)
        self._sel.register(self._wake_r, selectors.EVENT_READ, self._wake_r)

    def serve(self) -> None:
        """Run until shutdown(); then close the listening socket and every connection still reading."""
        try:
            while not self._stop.is_set():
                timeout = 0.2
                if self._reading:
                    timeout = min(timeout, max(0.0, self._reading[0].deadline - time.monotonic()))
                for key, _ in self._sel.select(timeout):
                    if key.data is None:
                        self._accept()
                    elif key.data is self._wake_r:
                        self._wake_r.recv(64)
                    else:
                        self._read(key.data)
                self._expire(time.monotonic())
        finally:
            self._sel.close()
            self.sock.close()
            self._wake_r.close()
            self._wake_w.close()
            while self._reading:
                conn = self._reading.popleft()
                if conn.buffer is not None:
                    conn.close()

    def shutdown(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def released(self) -> None:
        with self._lock:
            self.open -= 1

    def _accept(self) -> None:
        for _ in range(256):  # a burst is taken in one wake-up; the rest stay in the backlog for the next
            try:
                sock, _addr = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # EMFILE and the like: the connection waits in the backlog
                self._cannot_accept(e)
                return
            self._admit(sock)

    def _cannot_accept(self, e: OSError) -> None:
        """Out of descriptors (or the like): one log line per period, and a pause instead of a busy loop on the
        still-readable listening socket (the connections already open keep their deadlines meanwhile)."""
        now = time.monotonic()
        if now - self._busy_logged >= BUSY_LOG_EVERY_S:
            self._busy_logged = now
            self._log(f"cannot accept connections: {e}")
        time.sleep(0.05)

    def _admit(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        try:
            pid, uid = peer(sock)
        except OSError:
            sock.close()
            return
        if uid != os.getuid():
            self._log(f"refused a connection from uid {uid} (pid {pid})")
            sock.close()
            return
        with self._lock:
            full = self.open >= self.max_connections
            if not full:
                self.open += 1
                self.peak = max(self.peak, self.open)
            else:
                self.busy_refused += 1
        if full:
            self._refuse_busy(sock, pid)
            return
        conn = Connection(self, sock, pid, time.monotonic() + self.request_timeout_s)
        self._reading.append(conn)
        self._sel.register(sock, selectors.EVENT_READ, conn)

    def _refuse_busy(self, sock: socket.socket, pid: int) -> None:
        now = time.monotonic()
        if now - self._busy_logged >= BUSY_LOG_EVERY_S:
            self._busy_logged = now
            self._log(f"connection limit of {self.max_connections} reached: refusing pid {pid} and any other new "
                      f"client for now ({self.busy_refused} refused so far)")
        try:
            sock.send(encode({"type": wire.REFUSED, "message": f"proxy busy: {self.max_connections} connections open"}))
        except OSError:
            pass
        sock.close()

    def _read(self, conn: Connection) -> None:
        buffer = conn.buffer
        if buffer is None:
            return
        try:
            chunk = conn.sock.recv(READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            self._drop(conn, f"unreadable request: {e}" if buffer.started else "")
            return
        if not chunk:
            # connected and closed without a byte: a liveness probe, not an error
            self._drop(conn, "unreadable request: connection closed inside the frame" if buffer.started else "")
            return
        try:
            body = buffer.feed(chunk)
        except wire.FrameError as e:
            self._drop(conn, f"unreadable request: {e}")
            return
        if body is not None:
            self._hand_off(conn)
            self._on_request(conn, body)

    def _hand_off(self, conn: Connection) -> None:
        """The request is complete: the connection leaves the selector (its entry in _reading goes at expiry)."""
        conn.buffer = None
        self._sel.unregister(conn.sock)

    def _drop(self, conn: Connection, why: str) -> None:
        self._hand_off(conn)
        if why:
            self._on_bad(conn, why)  # logs, counts and sends the refusal
        conn.close()

    def _expire(self, now: float) -> None:
        while self._reading and self._reading[0].deadline <= now:
            conn = self._reading.popleft()
            if conn.buffer is None:
                continue  # complete (or dropped) in time
            with self._lock:
                self.timed_out += 1
            self._drop(conn, f"no complete request within {self.request_timeout_s:g} s")

    def counters(self) -> dict[str, Any]:
        with self._lock:
            return {"connections": self.open, "peak_connections": self.peak, "busy_refused": self.busy_refused,
                    "timed_out": self.timed_out}
