"""The step launcher's wire protocol, the server's side: frames, the launcher's request, the server's answers.

launcher.c holds the C copy: its header comment, `#define PROTOCOL`, `#define MAX_FRAME` and the answer bytes it
tests (`ack[0] != 'A'`, `frame[0] == 'X'`, …). A change here is a change there and a new VERSION;
tests/unit/test_step_protocol.py reads launcher.c and fails when the two differ.

Frames, both ways: a 4-byte little-endian length (1 to MAX_FRAME), then that many bytes.
  request:  VERSION NUL CWD NUL COUNT NUL ARG NUL … ENV NUL …   (COUNT step arguments, then NAME=VALUE strings)
  answers:  see Answer; after RUN, the launcher sends the command's exit status as a frame of decimal digits (a RUN
            command starting with thinlto_base.compile_env.COMPILE_MARK is a compile, run without the variables
            compile_env removes).
"""

from __future__ import annotations

import enum
import os
import socket
import struct
from dataclasses import dataclass

VERSION = b"gn-thinlto-step-v3"  # launcher.c: PROTOCOL
MAX_FRAME = 16 << 20  # launcher.c: MAX_FRAME
_LENGTH = struct.Struct("<I")


class Answer(bytes, enum.Enum):
    """The first byte of each frame the server sends."""

    TAKEN = b"A"  # the request is taken: the launcher waits for the rest as long as it takes
    FALL_BACK = b"F"  # the launcher runs the Python step instead
    EXIT = b"X"  # X STATUS NUL MESSAGE: print MESSAGE on stderr, exit STATUS
    RUN = b"R"  # R ARG NUL ARG NUL …: run this command with the launcher's streams, send back its status


class Gone(Exception):
    """The launcher closed its connection (ninja interrupted, or the launcher killed), or broke the protocol."""


@dataclass(frozen=True)
class Request:
    """What a launcher asks: its working directory, the step's command, its environment (NAME=VALUE, undecoded)."""

    cwd: str
    args: tuple[str, ...]
    environment: tuple[bytes, ...]


def decode_request(frame: bytes) -> Request | None:
    """The request FRAME spells, or None when it is not one of this VERSION."""
    parts = frame.split(b"\0")
    if len(parts) < 5 or parts[0] != VERSION or parts[-1] != b"" or not parts[2].isdigit():
        return None
    count = int(parts[2])
    if 3 + count >= len(parts):
        return None
    return Request(os.fsdecode(parts[1]), tuple(os.fsdecode(a) for a in parts[3 : 3 + count]),
                   tuple(parts[3 + count : -1]))


def send_frame(conn: socket.socket, body: bytes) -> None:
    conn.sendall(_LENGTH.pack(len(body)) + body)


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise Gone()
        data += chunk
    return bytes(data)


def read_frame(conn: socket.socket) -> bytes:
    (n,) = _LENGTH.unpack(_read_exactly(conn, _LENGTH.size))
    if not 0 < n <= MAX_FRAME:
        raise Gone()
    return _read_exactly(conn, n)


def send_answer(conn: socket.socket, answer: Answer) -> None:
    """A one-byte answer: TAKEN or FALL_BACK."""
    send_frame(conn, answer.value)


def send_exit(conn: socket.socket, status: int, message: str) -> None:
    send_frame(conn, Answer.EXIT.value + b"%d\0" % status + os.fsencode(message))


def run_in_launcher(conn: socket.socket, argv: list[str]) -> int:
    """Have the launcher run ARGV; its exit status (Gone when it answers anything else)."""
    send_frame(conn, Answer.RUN.value + b"".join(os.fsencode(a) + b"\0" for a in argv))
    try:
        return int(read_frame(conn))
    except ValueError:
        raise Gone() from None
