"""[harden] A client talks only to a proxy of its own user. Found by an attacker's audit (2026-11-29): with
GOMA_EXT_PROXY_DIR in a directory others can write to, another local user listening at the proxy's socket name got
every request (argv, cwd, settings) and answered `exit_code 0`: ninja recorded a success and the stale object
stayed. Both clients (the step server's thin client and the full one) now check the listener's uid (SO_PEERCRED),
as the step launcher does; refused, the thin client hands over to the full one, which refuses the directory."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from goma_ext.remote import proxy_client, thin_client

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plays another local user (CI runs as root)")

# A fake proxy: accepts, reads a little, answers a final frame that says the action succeeded.
FAKE = r"""
import json, os, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    body = json.dumps({"type": "result", "exit_code": 0, "stdout": "", "stderr": "all good"}).encode()
    try:
        c.recv(65536)
        c.sendall(struct.pack(">I", len(body)) + body)
    except OSError:
        pass
    c.close()
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every local user may write to, as a shared GOMA_EXT_PROXY_DIR would be."""
    d = Path(tempfile.mkdtemp(prefix="gx-peer-"))
    os.chmod(d, 0o1777)
    try:
        yield d
    finally:
        subprocess.run(["rm", "-rf", "--", str(d)], check=False)


def _listen(sock: Path, uid: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(["/usr/bin/python3", "-S", "-c", FAKE, str(sock)], stdout=subprocess.PIPE, text=True,
                            user=uid, group=uid if uid else 0, extra_groups=[], cwd="/")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
    return proc


@pytest.mark.parametrize("uid", [65534, 0], ids=["another-user", "this-user"])
def test_only_a_proxy_of_this_user_is_talked_to(shared_dir: Path, uid: int) -> None:
    sock = shared_dir / "proxy-0123abcd.sock"
    proc = _listen(sock, uid)
    try:
        files = {"sock": str(sock), "hung": str(shared_dir / "hung")}
        answer = thin_client._ask(files, {"op": "run"}, 5.0)
        if uid != os.geteuid():
            assert answer is None  # handed over to the full client, no answer taken
            with pytest.raises(PermissionError, match="not by this user"):
                proxy_client._connect(sock)
        else:
            assert answer is not None and answer["exit_code"] == 0  # the control: our own listener is heard
    finally:
        proc.kill()
        proc.wait()
