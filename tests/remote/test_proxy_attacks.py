"""`goma-ext proxy` under attack from a process of its own user (real proxy, real sockets): slowloris connections
beyond the connection cap, trickling clients, frames built to crash the parser. The proxy's threads stay
bounded, every bad client gets one refusal line and one log line (never a traceback), and everyone else is served.

Most tests point the proxy at an endpoint nothing listens on: pings, status and refusals need no cluster."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bench.subjects.thin_program import ThinProgram
from goma_ext.proxy.frames import MAX_DEPTH
from goma_ext.remote import proxy_protocol as wire
from tests.remote.conftest import Cluster, records
from tests.remote.test_proxy import client_env, run_client, warnings

NOWHERE = "grpc://127.0.0.1:1"
LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d goma-ext proxy\[\d+\]: \S")


@dataclass(frozen=True)
class Running:
    """A proxy started for one test, with its own state directory and limits."""

    env: dict[str, str]
    sock: str
    pid: int
    log: Path

    def threads(self) -> int:
        status = Path(f"/proc/{self.pid}/status").read_text()
        return int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]

    def log_lines(self) -> list[str]:
        return self.log.read_text().splitlines()


def start_proxy(endpoint: str, env: dict[str, str]) -> Running:
    subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "start", "--remote", endpoint], check=True,
                   env=env, capture_output=True, timeout=60)
    state = Path(env[wire.STATE_DIR_ENV])
    (sock,) = state.glob("*.sock")
    return Running(env, str(sock), int(sock.with_suffix(".pid").read_text()), sock.with_suffix(".log"))


@pytest.fixture
def proxy_env() -> Iterator[dict[str, str]]:
    directory = tempfile.mkdtemp(prefix="gxa-")
    env = {**os.environ, wire.STATE_DIR_ENV: directory}
    try:
        yield env
    finally:
        subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "stop"], capture_output=True, timeout=120,
                       env=env, check=False)
        shutil.rmtree(directory, ignore_errors=True)


def connect(sock_path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sock_path)
    return s


def frame(body: bytes) -> bytes:
    return wire.HEADER.pack(len(body)) + body


def ping(sock_path: str) -> dict[str, Any]:
    """What the client's side of the protocol gets for a ping (a refusal, when the proxy is at its cap)."""
    with connect(sock_path) as s:
        return wire.exchange(s, {"op": "ping"}, 10)


def status(p: Running) -> dict[str, Any]:
    with connect(p.sock) as s:
        return wire.exchange(s, {"op": "status"}, 10)


def answer_then_eof(s: socket.socket) -> dict[str, Any]:
    """The one frame the proxy sent on s, checking that it closed the connection after it."""
    message = wire.receive(s, wire.MAX_ANSWER_BYTES)
    assert s.recv(1) == b""
    return message


def no_traceback(p: Running) -> None:
    lines = p.log_lines()
    assert lines and all(LOG_LINE.match(line) for line in lines), [x for x in lines if not LOG_LINE.match(x)][:5]
    assert not any("Traceback" in line or "RecursionError" in line for line in lines)


def test_slowloris_connections_cost_no_threads_and_are_cut_off_at_the_deadline(proxy_env: dict[str, str]) -> None:
    p = start_proxy(NOWHERE, {**proxy_env, "GOMA_EXT_PROXY_MAX_CONNECTIONS": "1000",
                              "GOMA_EXT_PROXY_REQUEST_TIMEOUT": "3"})
    ping(p.sock)
    before = p.threads()
    held = [connect(p.sock) for _ in range(500)]
    t0 = time.monotonic()
    request = frame(b'{"op": "ping"}')
    sent = 0
    served_while_held = []
    while time.monotonic() - t0 < 2.0:  # every connection trickles a byte every 0.25 s: none ever completes
        for s in held:
            s.send(request[sent:sent + 1])
        sent += 1
        t = time.monotonic()
        served_while_held.append((ping(p.sock)["pid"], time.monotonic() - t))
        time.sleep(0.25)
    during = p.threads()
    figures = status(p)
    assert figures["connections"] == 501 and figures["timed_out"] == 0, figures  # 500 held and the status request
    assert during <= before + 2, (before, during)  # no thread per connection (+2: the pools start lazily)
    assert all(pid == p.pid and took < 1.0 for pid, took in served_while_held), served_while_held
    for s in held:  # cut off at the deadline (3 s after connecting), though each kept sending
        s.settimeout(5)
        answer = answer_then_eof(s)
        assert answer == {"type": wire.REFUSED, "message": "no complete request within 3 s"}, answer
        s.close()
    assert time.monotonic() - t0 < 6
    figures = status(p)
    assert figures["connections"] == 1 and figures["timed_out"] == 500 and figures["busy_refused"] == 0, figures
    assert p.threads() <= before + 2
    no_traceback(p)


def test_beyond_the_connection_cap_clients_are_refused_at_once_until_slots_free(proxy_env: dict[str, str]) -> None:
    p = start_proxy(NOWHERE, {**proxy_env, "GOMA_EXT_PROXY_MAX_CONNECTIONS": "32",
                              "GOMA_EXT_PROXY_REQUEST_TIMEOUT": "2"})
    before = p.threads()
    held = [connect(p.sock) for _ in range(100)]  # the first 32 stay idle: connected, sending nothing
    refused = []
    for s in held[32:]:
        refused.append(answer_then_eof(s))
    assert refused == [{"type": wire.REFUSED, "message": "proxy busy: 32 connections open"}] * 68
    assert ping(p.sock)["type"] == wire.REFUSED  # a legitimate client too, while the slots are held (it runs locally)
    assert p.threads() <= before + 2
    time.sleep(2.5)  # the held connections' deadline passes: their slots are free again
    assert ping(p.sock)["pid"] == p.pid
    for s in held[:32]:
        assert answer_then_eof(s) == {"type": wire.REFUSED, "message": "no complete request within 2 s"}
    figures = status(p)
    assert figures["busy_refused"] == 69 and figures["timed_out"] == 32 and figures["peak_connections"] == 32, figures
    lines = p.log_lines()
    assert sum("connection limit of 32 reached" in line for line in lines) == 1  # not one line per refusal
    for s in held:
        s.close()
    no_traceback(p)


def test_malformed_frames_get_one_refusal_line_and_the_proxy_serves_the_next(proxy_env: dict[str, str]) -> None:
    p = start_proxy(NOWHERE, {**proxy_env, "GOMA_EXT_PROXY_REQUEST_TIMEOUT": "2"})
    run = {"op": "run", "version": wire.version_tag(), "argv": ["clang"], "cwd": "/"}

    def body(**changes: Any) -> bytes:
        return json.dumps({**run, **changes}).encode()

    deep_run = json.dumps(run)[:-1].encode() + b', "settings": ' + b"[" * 100_000 + b"}"
    bad: list[tuple[bytes, str]] = [
        (frame(b"[" * 100_000), f"deeper than {MAX_DEPTH} levels"),
        (frame(b'{"a": ' * 100_000), f"deeper than {MAX_DEPTH} levels"),
        (frame(deep_run), f"deeper than {MAX_DEPTH} levels"),
        (wire.HEADER.pack(wire.MAX_REQUEST_BYTES + 1), "exceeds the limit"),
        (wire.HEADER.pack(0xFFFFFFFF) + b"{}", "exceeds the limit"),
        (frame(b'{"op": "\xff\xfe"}'), "not UTF-8"),
        (frame(b"{}") + b"more", "bytes after the request frame"),
        (frame(b"null"), "not an object"),
        (frame(json.dumps({"op": ["ping"]}).encode()), "unknown op"),
        (frame(body(argv={"a": 1})), "`argv` must be a list"),
        (frame(body(argv=["clang", 7])), "`argv` entries must be strings"),
        (frame(body(cwd=None)), "not an absolute path"),
        (frame(body(cwd="/tmp/\ud800")), "malformed request"),  # a lone surrogate: no path can name it
        (frame(body(cwd="/" + "x" * 100_000)), "…"),  # a huge value: the refusal line stays short
    ]
    for payload, why in bad:
        with connect(p.sock) as s:
            s.sendall(payload)
            answer = answer_then_eof(s)
        assert answer["type"] == wire.REFUSED and why in answer["message"], (why, answer)
        assert "\n" not in answer["message"] and len(answer["message"]) < 400, answer
        assert ping(p.sock)["pid"] == p.pid
    figures = status(p)
    assert figures["refused"] == len(bad) and figures.get("internal_errors", 0) == 0, figures
    assert sum("bad request from pid" in line for line in p.log_lines()) == len(bad)
    no_traceback(p)


def test_a_real_action_is_served_while_slowloris_connections_are_held(
    cluster: Cluster, program: ThinProgram, salt: str, proxy_env: dict[str, str]
) -> None:
    env = client_env(salt, Path(proxy_env[wire.STATE_DIR_ENV]), GOMA_EXT_PROXY_REQUEST_TIMEOUT="60")
    p = start_proxy(cluster.endpoint, env)
    before = p.threads()
    held = [connect(p.sock) for _ in range(500)]
    for s in held:
        s.send(b"\0\0")
    result = run_client(program, "alpha", cluster.endpoint, env)
    assert result.returncode == 0 and warnings(result.stderr) == [], result.stderr
    assert [r.mode.value for r in records(program)] in (["remote"], ["cache_hit"])
    figures = status(p)
    assert figures["connections"] == 501 and figures["runs"] == 1, figures
    # The action's own threads (the action pool, gRPC) come and stay; the 500 connections added none.
    assert p.threads() <= before + 16, (before, p.threads())
    for s in held:
        s.close()
    no_traceback(p)


@pytest.mark.parametrize(("args", "env", "why"), [
    (["--max-connections", "0"], {}, "--max-active and --max-connections must be at least 1"),
    (["--request-timeout", "0"], {}, "--idle-timeout and --request-timeout must be positive"),
    ([], {"GOMA_EXT_PROXY_MAX_CONNECTIONS": "many"}, "GOMA_EXT_PROXY_MAX_CONNECTIONS='many': not an integer"),
    ([], {"GOMA_EXT_PROXY_REQUEST_TIMEOUT": "soon"}, "GOMA_EXT_PROXY_REQUEST_TIMEOUT='soon': not a number"),
])
def test_bad_limits_are_one_line_errors(proxy_env: dict[str, str], args: list[str], env: dict[str, str],
                                        why: str) -> None:
    run = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "serve", "--remote", NOWHERE, *args],
                         env={**proxy_env, **env}, capture_output=True, text=True, timeout=60)
    assert run.returncode != 0 and run.stderr.count("\n") == 1 and why in run.stderr, run.stderr
