"""[sandbox] The client never sends a token or header in clear to another host: `goma-ext run` pointed at a
plaintext grpc:// server on a non-loopback address refuses with one line naming the setting, and the server (an
eavesdropper that records every call's metadata) receives nothing; with allow_insecure_credentials the same server
does receive the bearer token, which shows the refusal is what kept it out.

The non-loopback address is one this test assigns inside a network namespace it makes (removed after, also when
the test fails); nothing else on the machine is touched."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from goma_ext.cluster import procs

ADDRESS = "10.199.7.1"  # only inside the namespace below

# unshare and ip are in conftest's REQUIRED_TOOLS (./dev test installs util-linux and iproute2).
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace (CI runs as root)")


@pytest.fixture()
def netns() -> Iterator[list[str]]:
    """A network namespace held open by a sleeping process, with lo up and ADDRESS on it: the argv prefix that
    runs a command inside it."""
    holder = subprocess.Popen(["unshare", "--net", "--fork", "--kill-child", "sleep", "infinity"],
                              start_new_session=True)
    try:
        prefix = ["nsenter", f"--net=/proc/{holder.pid}/ns/net"]
        for _ in range(100):  # the namespace exists once unshare has forked
            if os.readlink(f"/proc/{holder.pid}/ns/net") != os.readlink("/proc/self/ns/net"):
                break
            time.sleep(0.05)
        for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "addr", "add", f"{ADDRESS}/32", "dev", "lo"]):
            subprocess.run([*prefix, *cmd], check=True)
        yield prefix
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()


@pytest.fixture()
def eavesdropper(netns: list[str], tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "calls.jsonl"
    port = procs.free_port()  # any port: the namespace has no other listener
    server = subprocess.Popen([*netns, sys.executable, str(Path(__file__).with_name("metadata_recorder.py")),
                               ADDRESS, str(port), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        yield f"grpc://{ADDRESS}:{port}", log
    finally:
        server.kill()
        server.wait()


def _run(netns: list[str], cwd: Path, endpoint: str, *extra: str) -> subprocess.CompletedProcess[str]:
    (cwd / "a.c").write_text("int f(void) { return 1; }\n")
    (cwd / "token").write_text("s3cret-token\n")
    (cwd / "token").chmod(0o600)  # a client refuses a token file others may read
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOMA_EXT_")}
    return subprocess.run([*netns, sys.executable, "-m", "goma_ext.cli", "run", "--no-proxy", "--remote", endpoint,
                           "--token-file", "token", *extra, "--", "clang-19", "-c", "a.c", "-o", "a.o"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_token_is_never_sent_in_clear_to_another_host(netns: list[str], eavesdropper: tuple[str, Path],
                                                         tmp_path: Path) -> None:
    endpoint, log = eavesdropper
    refused = _run(netns, tmp_path, endpoint)
    assert refused.returncode != 0 and not (tmp_path / "a.o").exists()
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "allow_insecure_credentials" in lines[0] and endpoint in lines[0], refused.stderr
    assert _calls(log) == []

    # The same command, allowed explicitly: the server now sees the token (and the backend falls back locally).
    allowed = _run(netns, tmp_path, endpoint, "--allow-insecure-credentials", "true")
    assert allowed.returncode == 0 and (tmp_path / "a.o").exists(), allowed.stderr
    seen = [kv for call in _calls(log) for kv in call["metadata"]]  # type: ignore[attr-defined]
    assert ["authorization", "Bearer s3cret-token"] in seen
