"""The worker runs an action in a bubblewrap sandbox under rlimits (or bare with --isolation none), tells a sandbox
that failed to start from a command that failed, and kills everything of the action at the timeout."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from goma_ext.reapi import action
from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.identity import CompilerIdentity
from goma_ext.worker.cli import _size
from goma_ext.worker.lease import execute_lease, hand_over, probe, remove_box
from goma_ext.worker.policy import Allowlist
from goma_ext.worker.sandbox import (
    NOT_ISOLATED,
    SHM_BYTES,
    DiskLow,
    Isolation,
    IsolationMode,
    Limits,
    RunAs,
    SandboxError,
    bwrap_argv,
    run,
)
from tests.bounded import ends_within

BARE = Isolation(IsolationMode.NONE, Limits(), None)
SH = Path("/usr/bin/dash")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap (Debian bubblewrap)")


def _sandboxed(**limits: float) -> Isolation:
    run_as = RunAs("nobody", 65534, 65534) if os.geteuid() == 0 else None
    return Isolation(IsolationMode.BWRAP, Limits(**limits), run_as)  # type: ignore[arg-type]


def test_fast_command_returns_its_code_and_streams(tmp_path: Path) -> None:
    t = time.monotonic()
    done = run(BARE, ["sh", "-c", "echo hi; echo oops >&2; exit 3"], SH, tmp_path, ".", {}, 10, tmp_path)
    assert (done.exit_code, done.stdout, done.stderr) == (3, b"hi\n", b"oops\n")
    assert time.monotonic() - t < 10.0  # hang guard: the runner must not wait for anything beyond the process


def test_timeout_kills_the_process_group_including_grandchildren(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    script = f"(sleep 1; touch {marker}) & sleep 5"
    t = time.monotonic()
    with pytest.raises(RemoteError) as e:
        run(BARE, ["sh", "-c", script], SH, tmp_path, ".", {}, 0.3, tmp_path)
    assert e.value.code == "DEADLINE_EXCEEDED" and time.monotonic() - t < 4.5  # killed before `sleep 5` ends
    time.sleep(1.2)
    assert not marker.exists()


def test_sandbox_command_line_is_closed_by_default(tmp_path: Path) -> None:
    argv = bwrap_argv(_sandboxed(), ["clang-19", "-c", "a.c"], Path("/usr/lib/llvm-19/bin/clang"), tmp_path, "out",
                      {"LANG": "C", "PATH": "/usr/bin"}, 9)
    for flag in ("--unshare-all", "--die-with-parent", "--new-session", "--clearenv"):
        assert flag in argv
    # a bounded /tmp, /dev read-only but for a small /dev/shm of the sandbox's own; / read-only last
    dev = argv.index("--dev")
    assert argv[dev:dev + 12] == ["--dev", "/dev", "--size", argv[dev + 3], "--tmpfs", "/tmp", "--size",
                                  str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
    tail = argv[argv.index("--json-status-fd") - 2:]
    assert tail == ["--remount-ro", "/", "--json-status-fd", "9", "--", "clang-19", "-c", "a.c"]
    binds = {argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind")}
    assert binds <= {"/usr", "/etc/ld.so.cache", str(tmp_path)} and not {"/", "/root", "/home", "/etc"} & binds
    assert argv[argv.index("--bind") + 1:argv.index("--bind") + 3] == [str(tmp_path), "/b"]
    assert argv[argv.index("--chdir") + 1] == "/b/out"


@needs_bwrap
def test_sandboxed_command_failure_is_a_result(box: Path) -> None:
    iso = _sandboxed()
    hand_over(box / "root", iso)
    done = run(iso, ["sh", "-c", "echo x > out; cat /etc/shadow; exit 3"], SH, box / "root", ".", {}, 30, box)
    assert done.exit_code == 3 and b"/etc/shadow" in done.stderr
    assert (box / "root" / "out").read_bytes() == b"x\n"


@needs_bwrap
def test_a_sandbox_that_cannot_start_is_a_sandbox_error(box: Path, tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: Creating new namespace failed' >&2\nexit 1\n")
    fake.chmod(0o755)
    iso = Isolation(IsolationMode.BWRAP, Limits(), None, bwrap=str(fake))
    with pytest.raises(SandboxError, match=r"failed to start.*Creating new namespace failed"):
        run(iso, ["true"], Path("/usr/bin/true"), box / "root", ".", {}, 30, box)


@needs_bwrap
def test_cpu_limit_fails_the_action_with_a_note(box: Path) -> None:
    iso = _sandboxed(cpu_s=1)
    hand_over(box / "root", iso)
    done = run(iso, ["sh", "-c", "while :; do :; done"], SH, box / "root", ".", {}, 30, box)
    assert done.exit_code == 152 and b"CPU time limit (1 s" in done.stderr


@needs_bwrap
def test_timeout_kills_every_process_of_the_sandbox(box: Path) -> None:
    iso = _sandboxed()
    hand_over(box / "root", iso)
    t = time.monotonic()
    with pytest.raises(RemoteError) as e:
        run(iso, ["sh", "-c", "setsid sh -c 'sleep 2; echo x > late' & sleep 30"], SH, box / "root", ".", {}, 0.5,
            box)
    assert e.value.code == "DEADLINE_EXCEEDED" and time.monotonic() - t < 5
    time.sleep(2.5)
    assert not (box / "root" / "late").exists()


@needs_bwrap
def test_cancel_kills_every_process_of_the_sandbox(box: Path) -> None:
    iso = _sandboxed()
    hand_over(box / "root", iso)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t = time.monotonic()
    with pytest.raises(RemoteError) as e:
        run(iso, ["sh", "-c", "setsid sh -c 'sleep 2; echo x > late' & sleep 30"], SH, box / "root", ".", {}, 60,
            box, cancel)
    assert e.value.code == "CANCELLED" and time.monotonic() - t < 5
    time.sleep(2.5)
    assert not (box / "root" / "late").exists()


@needs_bwrap
def test_tmp_is_private_and_bounded(box: Path) -> None:
    iso = _sandboxed(tmp_bytes=1 << 20)
    hand_over(box / "root", iso)
    done = run(iso, ["sh", "-c", "head -c 2000000 /dev/zero > /tmp/big; echo rc=$? >&2; ls -la /tmp >&2"], SH,
               box / "root", ".", {}, 30, box)
    assert b"rc=0" not in done.stderr and b"No space left" in done.stderr  # 1 MiB: /tmp's own bound


@needs_bwrap
def test_an_action_that_fills_the_disk_is_killed_at_the_floor(box: Path) -> None:
    """[harden] /b is on the worker's disk and a file's size is the only other bound: an action that keeps
    writing is killed once the file system's free space falls below what the worker keeps (here: 40 MiB less
    than it has now; it means to write 400), with RESOURCE_EXHAUSTED's error, and writes no further."""
    fs = os.statvfs(box)
    free = fs.f_bavail * fs.f_frsize
    if free < 1 << 30:
        pytest.skip(f"needs 1 GiB free on {box}'s file system")
    iso = _sandboxed(free_disk_bytes=free - (40 << 20))
    hand_over(box / "root", iso)
    script = "i=0; while [ $i -lt 100 ]; do head -c 4194304 /dev/zero > f$i; i=$((i+1)); sleep 0.02; done; echo done"
    with pytest.raises(DiskLow, match=r"the worker's disk has \d+ MiB free, less than the \d+ MiB it keeps"):
        run(iso, ["sh", "-c", script], SH, box / "root", ".", {}, 60, box)
    assert len(list((box / "root").glob("f*"))) < 100  # killed before it wrote all it meant to


@needs_bwrap
def test_probe_passes_here_and_boxes_are_removed(box: Path) -> None:
    assert probe(_sandboxed(), box.parent) is None
    (box / "root" / "d").mkdir()
    (box / "root" / "d").chmod(0)
    remove_box(box)
    assert not box.exists()


def test_sizes_parse_with_units() -> None:
    sizes = (_size("4G"), _size("512M"), _size("1GiB"), _size("0"), _size("100"))
    assert sizes == (4 << 30, 512 << 20, 1 << 30, 0, 100)


class _DictCas:
    """The three calls execute_lease makes, on a dict."""

    def __init__(self, blobs: dict[Digest, bytes]) -> None:
        self.blobs = dict(blobs)

    def read(self, d: Digest) -> bytes:
        return self.blobs[d]

    def read_many(self, ds: set[Digest]) -> dict[Digest, bytes]:
        return {d: self.blobs[d] for d in ds}

    def upload(self, blobs: dict[Digest, BlobSource]) -> int:
        for d, src in blobs.items():
            self.blobs[d] = src.data if src.data is not None else Path(str(src.path)).read_bytes()
        return len(blobs)


def _lease(argv: tuple[str, ...], outputs: tuple[str, ...] = (), env: tuple[tuple[str, str], ...] = ()
           ) -> tuple[_DictCas, Digest, Allowlist]:
    """An action running the allow-listed `sh` (dash) on an empty input root, with the environment ENV, as a client
    may send it (nothing checked here)."""
    ident = CompilerIdentity(Path("/usr/bin/dash"), "dash 0", "ab" * 32)
    root = re_pb2.Directory()
    built = action.build(action.ActionSpec(argv, "", outputs, ident.properties(), Digest.of_message(root),
                                           environment=env))
    cas = _DictCas({Digest.of_message(root): serialize(root), built.command_digest: built.command,
                    built.action_digest: built.action})
    return cas, built.action_digest, Allowlist({"sh": (ident,)})


@pytest.mark.parametrize("sandboxed", [True, False], ids=["bwrap", "none"])
def test_a_lease_says_whether_it_ran_isolated(box: Path, sandboxed: bool) -> None:
    if sandboxed and shutil.which("bwrap") is None:
        pytest.skip("needs bwrap")
    iso = _sandboxed() if sandboxed else Isolation(IsolationMode.NONE, Limits(), _sandboxed().run_as)
    cas, digest, allow = _lease(("sh", "-c", "echo out > o.txt; id -u"), ("o.txt",))
    outcome = execute_lease(cas, digest, allow, box.parent, iso)  # type: ignore[arg-type]
    assert outcome.result is not None and outcome.result.exit_code == 0, outcome.status
    assert [f.path for f in outcome.result.output_files] == ["o.txt"]
    uid = str(iso.run_as.uid if iso.run_as else os.geteuid()).encode()
    assert cas.read(Digest.from_proto(outcome.result.stdout_digest)).strip() == uid  # never root when run as root
    note = "" if sandboxed else NOT_ISOLATED
    assert outcome.status.message == note and outcome.result.execution_metadata.worker == note
    assert sorted(p.name for p in box.parent.iterdir()) == [box.name]  # the lease's own box is gone


def _start_worker(tmp_path: Path, *extra: str, path: str = "/usr/bin:/bin") -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "goma_ext.cli", "worker", "--remote", "grpc://127.0.0.1:1", "--work-dir",
            str(tmp_path / "w"), *extra]
    return ends_within(argv, 60, env={**os.environ, "PATH": path})


def test_the_worker_refuses_to_start_without_bwrap(tmp_path: Path) -> None:
    proc = _start_worker(tmp_path, path=str(tmp_path))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "needs bwrap (Debian package bubblewrap)" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="the runner user rule is for workers started as root")
def test_a_root_worker_refuses_to_start_without_an_unprivileged_runner(tmp_path: Path) -> None:
    proc = _start_worker(tmp_path, "--run-as", "gx-no-such-user")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr
    proc = _start_worker(tmp_path, "--run-as", "root")
    assert proc.returncode == 2 and "uid/gid 0 is root" in proc.stderr


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="needs a runner user that cannot reach the sandbox dir")
def test_a_worker_whose_runner_cannot_reach_its_sandboxes_refuses_to_start(tmp_path: Path) -> None:
    proc = _start_worker(tmp_path, "--run-as", "nobody")  # pytest's tmp dirs are 0700
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "does not work here as nobody" in proc.stderr and "Permission denied" in proc.stderr
