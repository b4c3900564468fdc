"""The step protocol's two copies agree (launcher.c and step_protocol.py), and the server's side frames and
decodes as launcher.c's header comment says."""

from __future__ import annotations

import re
import socket

import pytest

from gn_thinlto.steps.launcher_build import LAUNCHER_SOURCE
from gn_thinlto.steps.step_protocol import (
    MAX_FRAME,
    VERSION,
    Answer,
    Gone,
    Request,
    decode_request,
    read_frame,
    run_in_launcher,
    send_exit,
    send_frame,
)

C = open(LAUNCHER_SOURCE).read()


def test_launcher_c_has_the_same_version_and_frame_limit() -> None:
    version = re.search(r'^#define PROTOCOL "([^"]*)"$', C, re.MULTILINE)
    limit = re.search(r"^#define MAX_FRAME \((\d+)u << (\d+)\)$", C, re.MULTILINE)
    assert version and limit, "launcher.c no longer spells PROTOCOL or MAX_FRAME as this test reads them"
    assert version.group(1).encode() == VERSION
    assert int(limit.group(1)) << int(limit.group(2)) == MAX_FRAME


def test_launcher_c_knows_the_answers_the_server_sends() -> None:
    documented = set(re.findall(r"^\s*(?:answers:)?\s+'(.)' ", C, re.MULTILINE))
    tested = set(re.findall(r"\w+\[0\] [!=]= '(.)'", C))  # FALL_BACK is "anything else": no test of its own
    assert documented == {a.value.decode() for a in Answer}
    assert tested == {a.value.decode() for a in Answer} - {Answer.FALL_BACK.value.decode()}


def test_a_request_decodes_as_the_launcher_spells_it() -> None:
    frame = VERSION + b"\0/out\0" + b"2\0" + b"python\0backend.py\0" + b"PATH=/bin\0A=\xff\0"
    assert decode_request(frame) == Request("/out", ("python", "backend.py"), (b"PATH=/bin", b"A=\xff"))


@pytest.mark.parametrize("frame", [
    b"gn-thinlto-step-v1\0/out\x002\0a\0b\0",  # another version
    VERSION + b"\0/out\x003\0a\0b\0",  # fewer arguments than COUNT
    VERSION + b"\0/out\0x\0a\0b\0",  # COUNT not a number
    VERSION + b"\0/out\x002\0a\0b",  # not NUL-terminated
])
def test_anything_else_is_no_request(frame: bytes) -> None:
    assert decode_request(frame) is None


def test_frames_carry_a_little_endian_length() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        send_exit(ours, 3, "oops\n")
        assert theirs.recv(64) == b"\x08\0\0\0" + b"X3\0oops\n"
        theirs.sendall(b"\x01\0\0\0" + b"7")
        assert read_frame(ours) == b"7"
        theirs.sendall((MAX_FRAME + 1).to_bytes(4, "little"))
        with pytest.raises(Gone):
            read_frame(ours)


def test_a_command_run_by_the_launcher_returns_its_status_and_anything_else_is_gone() -> None:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        send_frame(theirs, b"0")
        assert run_in_launcher(ours, ["cc", "-c"]) == 0
        assert read_frame(theirs) == b"Rcc\0-c\0"
        send_frame(theirs, b"F")
        with pytest.raises(Gone):
            run_in_launcher(ours, ["cc"])
