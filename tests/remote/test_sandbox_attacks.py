"""Attacks on the sandboxed workers by an unprivileged local user (created by the test, removed after) through an
REAPI client that sends any argv (tests/remote/attack_client.py). Each attack fails with a clear error and leaves
no trace on the host: no file written, no connection made, no process of the runner uid after the lease.
Needs root (as CI runs): the workers then run actions as the cluster's runner user."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.remote.attacker import Attacker
from tests.remote.conftest import Cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the attack suite plays a second local user: needs root")

SLEEP_MARK = "4242"  # `sleep 4242`: the plugin's background process, looked for after the lease
EVIL_C = r"""
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
#if defined(MODE_ID)
  system("id >&2; setsid sleep " SLEEP_MARK " </dev/null >/dev/null 2>&1 &");
  fprintf(stderr, "evil: id ran, sleeper started\n");
#elif defined(MODE_CONNECT)
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET; a.sin_port = htons(PORT); a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) { fprintf(stderr, "evil: connected\n"); _exit(0); }
  fprintf(stderr, "evil: connect: %s\n", strerror(errno)); _exit(1);
#elif defined(MODE_FORK)
  long n = 0;
  for (;;) { pid_t p = fork(); if (p == 0) { pause(); _exit(0); } if (p < 0) break; n++; }
  fprintf(stderr, "evil: forked %ld then: %s\n", n, strerror(errno)); _exit(1);
#elif defined(MODE_MEM)
  size_t mib = 0;
  for (;;) {  /* touch one byte of each chunk: the allocation is real, the memory mostly not */
    volatile char *p = malloc((size_t)64 << 20);
    if (!p) break;
    p[0] = 1; mib += 64;
  }
  fprintf(stderr, "evil: malloc failed after %zu MiB: %s\n", mib, strerror(errno)); _exit(1);
#endif
}
"""


@pytest.fixture
def source(attacker: Attacker) -> Path:
    return attacker.put("a.c", b"int f(void) { return 1; }\n")


def _plugin(attacker: Attacker, tmp_path: Path, mode: str, *defines: str) -> Path:
    src = tmp_path / "evil.c"
    src.write_text(EVIL_C)
    so = tmp_path / "evil.so"
    subprocess.run(["clang-19", "-shared", "-fPIC", "-O0", f"-DMODE_{mode}", f'-DSLEEP_MARK="{SLEEP_MARK}"', *defines,
                    "-o", str(so), str(src)], check=True, capture_output=True)
    return attacker.put("evil.so", so.read_bytes())


def _runner_processes(cluster: Cluster) -> list[str]:
    """The runner user's live processes of these attacks: those whose command line names the plugin (the clang
    that loaded it and every fork of it, the bwrap around it) or its background `sleep`. Other tests' actions run
    as the same user on the shared cluster at the same time (pytest-xdist: a backend of another worker's build) and
    are not counted; nor is an exited one its parent has not reaped yet (`<defunct>`), which runs nothing."""
    assert cluster.runner is not None
    proc = subprocess.run(["pgrep", "-a", "-u", str(cluster.runner.uid)], capture_output=True, text=True)
    return [line for line in proc.stdout.splitlines()
            if not line.endswith("<defunct>") and ("evil.so" in line or f"sleep {SLEEP_MARK}" in line)]


def _no_runner_process_after_lease(cluster: Cluster) -> None:
    deadline = time.monotonic() + 3
    while _runner_processes(cluster) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _runner_processes(cluster) == []


@pytest.mark.parametrize("path", ["/etc/shadow", "../../../../../../etc/shadow"])
def test_reading_a_root_only_file_fails(attacker: Attacker, path: str) -> None:
    out = attacker.send(["clang-19", "-E", "-P", "-x", "c", path], {}, outputs=())
    assert out["exit_code"] != 0 and "no such file or directory" in out["stderr"]
    assert "root:" not in out["stdout"]


@pytest.mark.parametrize("target", ["../../../../../../etc/gx-escape-{}.o", "/etc/gx-escape-{}.o",
                                    "../../../../../../tmp/gx-escape-{}.o", "/tmp/gx-escape-{}.o",
                                    "/dev/gx-escape-{}.o", "/dev/shm/gx-escape-{}.o"])
def test_writing_outside_the_input_root_leaves_no_file(attacker: Attacker, source: Path, target: str) -> None:
    target = target.format(os.getpid())
    host = Path("/") / os.path.normpath(target).lstrip("./")
    out = attacker.send(["clang-19", "-c", "a.c", "-o", target], {"a.c": source})
    if host.parts[1] == "etc" or host.parent == Path("/dev"):  # read-only in the sandbox: the compiler fails
        assert out["exit_code"] != 0 and "Read-only file system" in out["stderr"], out
    assert not host.exists()  # /tmp and /dev/shm in the sandbox are private tmpfs: the file there vanished with it


def test_filling_dev_shm_stops_at_its_size(attacker: Attacker, tmp_path: Path) -> None:
    """/dev/shm is a tmpfs of the sandbox's own, bounded (--dev's /dev is half the RAM, which --memory does not
    count): writing past its size fails with ENOSPC instead of taking the host's memory."""
    from goma_ext.worker.sandbox import SHM_BYTES

    # a few hundred bytes that the preprocessor expands to 80 MB: 1,000 characters 80,000 times
    blow = "".join(f"#define {n} {' '.join([p] * k)}\n" for n, p, k in (("B", "A", 10), ("C", "B", 10),
                                                                      ("D", "C", 10), ("E", "D", 10), ("F", "E", 8)))
    src = attacker.put("blow.c", f'#define A "{"x" * 1000}"\n{blow}F\n'.encode())
    assert 80_000 * 1000 > SHM_BYTES
    out = attacker.send(["clang-19", "-E", "-P", "blow.c", "-o", "/dev/shm/blow.i"], {"blow.c": src}, outputs=())
    assert out["exit_code"] != 0, out
    assert "No space left on device" in out["stderr"], out["stderr"][-500:]  # writable, and bounded


def test_a_plugin_runs_unprivileged_and_its_background_process_dies_with_the_lease(
    attacker: Attacker, source: Path, tmp_path: Path, cluster: Cluster
) -> None:
    evil = _plugin(attacker, tmp_path, "ID")
    out = attacker.send(["clang-19", "-fplugin=./evil.so", "-c", "a.c", "-o", "a.o"], {"a.c": source, "evil.so": evil})
    assert cluster.runner is not None
    assert "evil: id ran" in out["stderr"] and "uid=0" not in out["stderr"]
    assert f"uid={cluster.runner.uid}" in out["stderr"]
    _no_runner_process_after_lease(cluster)
    assert subprocess.run(["pgrep", "-f", f"sleep {SLEEP_MARK}"], capture_output=True).returncode == 1


def test_no_network_even_to_loopback(attacker: Attacker, source: Path, tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        evil = _plugin(attacker, tmp_path, "CONNECT", f"-DPORT={port}")
        out = attacker.send(["clang-19", "-fplugin=./evil.so", "-c", "a.c"], {"a.c": source, "evil.so": evil})
        assert out["exit_code"] == 1 and "evil: connect: Connection refused" in out["stderr"], out
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected


def test_a_fork_bomb_hits_the_process_limit_and_leaves_nothing(
    attacker: Attacker, source: Path, tmp_path: Path, cluster: Cluster
) -> None:
    evil = _plugin(attacker, tmp_path, "FORK")
    out = attacker.send(["clang-19", "-fplugin=./evil.so", "-c", "a.c"], {"a.c": source, "evil.so": evil})
    assert out["exit_code"] == 1 and "Resource temporarily unavailable" in out["stderr"], out
    assert "process limit (256" in out["stderr"]
    _no_runner_process_after_lease(cluster)


def test_allocating_past_the_memory_limit_fails(attacker: Attacker, source: Path, tmp_path: Path) -> None:
    evil = _plugin(attacker, tmp_path, "MEM")
    out = attacker.send(["clang-19", "-fplugin=./evil.so", "-c", "a.c"], {"a.c": source, "evil.so": evil})
    assert out["exit_code"] == 1 and "evil: malloc failed after" in out["stderr"], out
    mib = int(out["stderr"].split("malloc failed after ")[1].split()[0])
    assert mib < 4096 and "memory limit (4096 MiB" in out["stderr"]


def test_a_normal_action_still_works_after_the_attacks(attacker: Attacker, source: Path) -> None:
    out = attacker.send(["clang-19", "-c", "a.c", "-o", "a.o"], {"a.c": source})
    assert out["exit_code"] == 0 and out["outputs"] == ["a.o"] and out["worker"] == ""
