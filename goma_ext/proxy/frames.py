"""A request frame read piece by piece (no thread waits on a slow client) and decoded without trusting it."""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from goma_ext.remote import proxy_protocol as wire

# Deepest nesting of arrays and objects a request may have. A real one has 3 levels (settings.section.key may
# hold a list: 4); json.loads would recurse once per level and raise RecursionError near 1,000.
MAX_DEPTH = 32
# A JSON string; an unterminated one runs to the end of the text. The pattern always matches where a string starts:
# one that could fail (an unterminated string must end in a quote) would scan to the end from each of its quotes,
# and a megabyte of `"\"\"…` took half an hour, holding the GIL (an attacker's review, 2026-12-07).
_STRING = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class FrameBuffer:
    """The bytes of one request frame as they arrive: feed() returns the body once the frame is complete."""

    __slots__ = ("_data", "_size", "limit")

    def __init__(self, limit: int = wire.MAX_REQUEST_BYTES) -> None:
        self._data = bytearray()
        self._size = -1
        self.limit = limit

    @property
    def started(self) -> bool:
        return bool(self._data) or self._size >= 0

    def feed(self, chunk: bytes) -> bytes | None:
        """The frame's body when chunk completes it, else None; FrameError for an oversized frame or bytes
        after it (a connection carries one request)."""
        self._data += chunk
        if self._size < 0:
            if len(self._data) < wire.HEADER.size:
                return None
            (self._size,) = wire.HEADER.unpack_from(self._data)
            del self._data[: wire.HEADER.size]
            if self._size > self.limit:
                raise wire.FrameError(f"frame of {self._size} bytes exceeds the limit of {self.limit}")
        if len(self._data) < self._size:
            return None
        if len(self._data) > self._size:
            raise wire.FrameError(f"{len(self._data) - self._size} bytes after the request frame")
        return bytes(self._data)


def encode(message: Any) -> bytes:
    """One frame of the proxy's, ready to send (what proxy_protocol.send writes)."""
    data = json.dumps(message, separators=(",", ":")).encode()
    return wire.HEADER.pack(len(data)) + data


def nesting(text: str) -> int:
    """How deep arrays and objects nest in JSON text (brackets inside strings do not count), or MAX_DEPTH when
    the text has too few brackets to nest deeper."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return MAX_DEPTH  # cannot be deeper: the common case costs two C-speed counts
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def decode(body: bytes) -> dict[str, Any]:
    """A frame's body as a JSON object; FrameError (one line) if it is not UTF-8, too deep, not JSON or no object."""
    try:
        text = body.decode()
    except UnicodeDecodeError as e:
        raise wire.FrameError(f"frame is not UTF-8 (byte {e.start})") from e
    if nesting(text) > MAX_DEPTH:
        raise wire.FrameError(f"frame nests arrays/objects deeper than {MAX_DEPTH} levels")
    try:
        message = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise wire.FrameError(f"frame is not JSON: {e}") from e
    if not isinstance(message, dict):
        raise wire.FrameError(f"frame is a JSON {type(message).__name__}, not an object")
    return message
