"""A loopback port taken as another local user would take it, recording whoever connects: a secret must never
reach it (tests of the cluster's redis and of its workers' connection to BuildGrid)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def squatting(port: int = 0, answer: bytes | tuple[bytes, ...] = b"") -> Iterator[tuple[int, list[bytes]]]:
    """Listen on 127.0.0.1:PORT (0: any free one); yield the port and the list of what each connection sent, until
    it closed or was silent for 2 s (b"(connected)" when it sent nothing). ANSWER is sent after the first bytes
    received; a tuple of answers, one after each read in turn (a conversation). On exit the port is free again: the
    accept is woken, not left holding it."""
    squatter = socket.socket()
    squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    heard: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = squatter.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                replies = list(answer) if isinstance(answer, tuple) else [answer] if answer else []
                heard.append(b"(connected)")
                got, at = b"", len(heard) - 1  # recorded as it arrives: a test may look while it still talks
                try:
                    while chunk := conn.recv(65536):
                        got += chunk
                        heard[at] = got
                        if replies:
                            conn.sendall(replies.pop(0))
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield squatter.getsockname()[1], heard
    finally:
        squatter.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone would leave the port bound by it)
        squatter.close()
        thread.join(5)
