"""The proxy's frame reader on its own: frames fed in pieces, limits, and decoding that only ever raises FrameError."""

from __future__ import annotations

import json
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from goma_ext.proxy.frames import MAX_DEPTH, FrameBuffer, decode, nesting
from goma_ext.remote import proxy_protocol as wire
from tests import budget
from tests.bounded import ends_within


def _frame(body: bytes) -> bytes:
    return wire.HEADER.pack(len(body)) + body


def _request() -> dict[str, object]:
    return wire.run_message(["clang", "-c", "a.o", "-o", "a.native.o"], "/tmp/out", ("/usr/bin/clang", "v", "0" * 64),
                            {"endpoint": "grpc://h:1", "headers": {"x": ["a", "b"]}}, {"GOMA_EXT_X": "1"},
                            {"exec_root": ".."}, "", (["a.o"], ["a.native.o"]))


def test_a_frame_fed_byte_by_byte_completes_on_its_last_byte() -> None:
    data = _frame(json.dumps(_request()).encode())
    buffer = FrameBuffer()
    assert not buffer.started
    for i, byte in enumerate(data):
        body = buffer.feed(bytes([byte]))
        assert buffer.started
        assert (body is not None) == (i == len(data) - 1)
    assert body is not None and decode(body) == _request()


def test_an_oversized_length_is_refused_from_the_header_alone() -> None:
    with pytest.raises(wire.FrameError, match="exceeds the limit of 1024"):
        FrameBuffer(limit=1024).feed(wire.HEADER.pack(1025))


def test_bytes_after_the_frame_are_refused() -> None:
    with pytest.raises(wire.FrameError, match="3 bytes after the request frame"):
        FrameBuffer().feed(_frame(b"{}") + b"abc")


def test_an_empty_frame_is_complete_and_not_json() -> None:
    body = FrameBuffer().feed(wire.HEADER.pack(0))
    assert body == b""
    with pytest.raises(wire.FrameError, match="not JSON"):
        decode(body)


@pytest.mark.parametrize(("body", "why"), [
    (b"[" * 100_000, f"deeper than {MAX_DEPTH} levels"),
    (b'{"a":' * 100_000, f"deeper than {MAX_DEPTH} levels"),
    (b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), f"deeper than {MAX_DEPTH} levels"),
    (b"\xff\xfe{}", "not UTF-8 (byte 0)"),
    (b'{"op": "\xc3"}', "not UTF-8 (byte 8)"),
    (b"{oops", "not JSON"),
    (b"[1, 2]", "JSON list, not an object"),
    (b'"op"', "JSON str, not an object"),
])
def test_bad_bodies_are_one_line_frame_errors(body: bytes, why: str) -> None:
    with pytest.raises(wire.FrameError, match=why.replace("(", r"\(").replace(")", r"\)")) as e:
        decode(body)
    assert "\n" not in str(e.value)


def test_nesting_up_to_the_limit_and_brackets_in_strings_are_fine() -> None:
    deep = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert decode(f'{{"a": {deep}}}'.encode()) == {"a": json.loads(deep)}
    text = json.dumps({"argv": ["[" * 1000, "{" * 1000, '"\\[', "]]]"]})
    assert nesting(text) == 2
    assert decode(text.encode())["argv"][0] == "[" * 1000


def test_a_megabyte_of_brackets_is_judged_quickly() -> None:
    body = b"[" * wire.MAX_REQUEST_BYTES
    t = time.process_time()
    with pytest.raises(wire.FrameError):
        decode(body)
    assert time.process_time() - t < 1.0


def test_a_megabyte_of_unterminated_strings_is_judged_quickly() -> None:
    """Each quote of an unterminated string used to start a scan to the end of the text (quadratic: about half an
    hour for the largest frame, the GIL held throughout). In a process of its own: the old pattern could not be
    interrupted."""
    code = ("from goma_ext.proxy.frames import decode\nfrom goma_ext.remote.proxy_protocol import FrameError\n"
            "body = b'[]' * 40 + b'\"' + b'\\\\\"' * 500_000 + b'\\\\'\n"
            "try:\n    decode(body)\nexcept FrameError as e:\n    print('refused:', e)\n")
    proc = ends_within([sys.executable, "-c", code], 60.0)
    assert proc.returncode == 0 and proc.stdout.startswith("refused: frame is not JSON"), proc.stdout + proc.stderr


def test_a_real_request_costs_two_counts() -> None:
    text = json.dumps(_request())
    assert text.count("[") + text.count("{") <= MAX_DEPTH
    assert decode(text.encode()) == json.loads(text)  # its CPU per action is bench proxy's to measure


@settings(max_examples=budget.cases(300), deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_frame_error(body: bytes) -> None:
    try:
        assert isinstance(decode(body), dict)
    except wire.FrameError as e:
        assert "\n" not in str(e)


@settings(max_examples=budget.cases(200), deadline=None)
@given(st.binary(max_size=64), st.integers(min_value=1, max_value=7))
def test_any_split_of_a_stream_gives_the_same_verdict(data: bytes, step: int) -> None:
    def verdict(chunks: list[bytes]) -> object:
        buffer = FrameBuffer(limit=32)
        try:
            for chunk in chunks:
                body = buffer.feed(chunk)
                if body is not None:
                    return body
        except wire.FrameError as e:
            return str(e)
        return None

    whole = verdict([data])
    pieces = verdict([data[i:i + step] for i in range(0, len(data), step)])
    if isinstance(whole, bytes):  # in pieces the frame completes before any trailing bytes arrive
        assert pieces == whole or data[4 + len(whole):]
    else:
        assert pieces == whole or isinstance(pieces, bytes)
