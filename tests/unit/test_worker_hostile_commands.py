"""[harden] What a client's Command or an action's own process can throw at the root side of the worker, found by an
attacker's audit (2026-11-29):

- a NUL byte in an environment variable's value would end one of bwrap's NUL-separated options and start others
  of the client's choice (`--share-net`, `--bind / /host`: the host's network and file system in the sandbox);
- a NUL byte in an argument made Popen raise out of execute_lease, and a declared output 1,500 directories deep,
  or a tree that deep made by the action, made the box's removal raise RecursionError: the lease never completed,
  its bot waited forever, and a restarted worker failed again on the box left behind;
- a killed action's processes went on writing in its root for a moment after the worker stopped waiting, while
  the worker removed that root as root.

Each is refused with INVALID_ARGUMENT, or handled, and the worker goes on."""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.proto import code_pb2, re_pb2
from goma_ext.worker import bots, sandbox
from goma_ext.worker.lease import execute_lease, hand_over, remove_box
from goma_ext.worker.sandbox import run
from tests.unit.test_worker_runner import SH, _lease, _sandboxed, needs_bwrap


@needs_bwrap
@pytest.mark.parametrize(("argv", "env", "why"), [
    (("sh", "-c", "touch ran"), (("X", "a\0--share-net\0--bind\0/\0/host"),), "holds a NUL byte"),
    (("sh", "-c", "touch ran"), (("A=B", "x"),), "is not a name"),
    (("sh", "-c", "touch ran"), (("", "x"),), "is not a name"),
    (("sh", "-c", "touch ran", "a\0b"), (), "argument 3 holds a NUL byte"),
], ids=["nul-in-value", "equals-in-name", "empty-name", "nul-in-argument"])
def test_a_command_the_sandbox_cannot_pass_as_it_is_is_refused(box: Path, argv: tuple[str, ...],
                                                                env: tuple[tuple[str, str], ...], why: str) -> None:
    cas, digest, allow = _lease(argv, ("ran",), env)
    outcome = execute_lease(cas, digest, allow, box.parent, _sandboxed())  # type: ignore[arg-type]
    assert outcome.status.code == code_pb2.INVALID_ARGUMENT and why in outcome.status.message, outcome.status
    assert outcome.result is None
    assert sorted(p.name for p in box.parent.iterdir()) == [box.name]  # nothing made for it


@needs_bwrap
def test_an_environment_variable_of_two_dashes_is_passed_as_it_is(box: Path) -> None:
    """bwrap's options and the command are split at the "--" before argv, not at a variable that is "--"."""
    cas, digest, allow = _lease(("sh", "-c", 'printf "%s" "$X"'), (), (("X", "--"),))
    outcome = execute_lease(cas, digest, allow, box.parent, _sandboxed())  # type: ignore[arg-type]
    assert outcome.result is not None and outcome.result.exit_code == 0, outcome.status
    assert cas.read(Digest.from_proto(outcome.result.stdout_digest)) == b"--"


@pytest.mark.parametrize("what", ["Action", "Command"])
def test_an_action_or_command_larger_than_a_worker_reads_is_refused_unread(box: Path, what: str) -> None:
    """A client names their sizes: padded with unknown fields, one could be gigabytes, read whole by root."""
    cas, digest, allow = _lease(("sh", "-c", "true"))
    huge = Digest("0" * 64, (16 << 20) + 1)
    if what == "Command":
        act = re_pb2.Action()
        act.ParseFromString(cas.blobs[digest])
        act.command_digest.CopyFrom(huge.to_proto())
        digest = Digest.of_message(act)
        cas.blobs[digest] = serialize(act)
    else:
        digest = huge
    outcome = execute_lease(cas, digest, allow, box.parent, _sandboxed())  # type: ignore[arg-type]
    assert outcome.status.code == code_pb2.RESOURCE_EXHAUSTED and f"the {what} is" in outcome.status.message


def test_bwrap_options_never_carry_a_nul_byte() -> None:
    """Whoever calls it: a NUL would split one option into several."""
    with pytest.raises(ValueError, match="NUL"):
        sandbox._args_fd(["--setenv", "X", "a\0--share-net"])


@needs_bwrap
def test_an_output_deeper_than_an_input_tree_may_be_is_refused(box: Path) -> None:
    cas, digest, allow = _lease(("sh", "-c", "true"), ("a/" * 1500 + "o",))
    outcome = execute_lease(cas, digest, allow, box.parent, _sandboxed())  # type: ignore[arg-type]
    assert outcome.status.code == code_pb2.INVALID_ARGUMENT and "deeper than" in outcome.status.message
    assert sorted(p.name for p in box.parent.iterdir()) == [box.name]


@needs_bwrap
def test_outputs_whose_parents_pass_the_node_bound_are_refused_before_any_work(box: Path) -> None:
    """The worker makes every output's parents before the action starts: 10,000 outputs 63 levels deep would be
    630,000 directories, beyond what an input tree may have. They count against --max-input-nodes."""
    outputs = tuple(f"o{i}/" + "d/" * 30 + "x.o" for i in range(40))  # 40 × 31 = 1,240 directories
    cas, digest, allow = _lease(("sh", "-c", "true"), outputs)
    iso = sandbox.Isolation(sandbox.IsolationMode.BWRAP, sandbox.Limits(input_nodes=1000), _sandboxed().run_as)
    outcome = execute_lease(cas, digest, allow, box.parent, iso)  # type: ignore[arg-type]
    assert outcome.status.code == code_pb2.RESOURCE_EXHAUSTED and "more than 1000 directories" in outcome.status.message
    assert sorted(p.name for p in box.parent.iterdir()) == [box.name]
    outcome = execute_lease(cas, digest, allow, box.parent, _sandboxed())  # the default bound: made, and run
    assert outcome.result is not None and outcome.result.exit_code == 0, outcome.status


@needs_bwrap
def test_a_tree_deeper_than_pythons_recursion_made_by_the_action_is_removed(box: Path) -> None:
    """The action makes 3,000 nested directories in its root; the lease completes and its box goes."""
    deep = "import os\nfor _ in range(3000):\n    os.mkdir('d')\n    os.chdir('d')\n"
    cas, digest, allow = _lease(("sh", "-c", f'python3 -c "{deep}"'))
    outcome = execute_lease(cas, digest, allow, box.parent, _sandboxed())  # type: ignore[arg-type]
    assert outcome.result is not None and outcome.result.exit_code == 0, outcome.status
    assert sorted(p.name for p in box.parent.iterdir()) == [box.name]


def test_remove_box_removes_a_tree_deeper_than_pythons_recursion(box: Path) -> None:
    fd = os.open(box / "root", os.O_RDONLY)
    try:
        for name in ["d"] * 3000:
            os.mkdir(name, dir_fd=fd)
            new = os.open(name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = new
    finally:
        os.close(fd)
    remove_box(box)
    assert not box.exists()


@needs_bwrap
def test_a_killed_action_writes_nothing_once_the_worker_stops_waiting(box: Path) -> None:
    """Past its timeout the action (eight writers) is killed; when run() returns, none of its processes is left to
    write. (bwrap's own exit, which the worker waits for, comes before the kernel has killed the rest.)"""
    iso = _sandboxed()
    hand_over(box / "root", iso)
    root = box / "root"
    writers = "for i in 1 2 3 4 5 6 7 8; do (while :; do echo x >> f$i; done) & done; wait"
    late = 0
    for _ in range(5):
        with pytest.raises(RemoteError):
            run(iso, ["sh", "-c", writers], SH, root, ".", {}, 0.3, box)
        sizes = {p.name: p.stat().st_size for p in root.glob("f*")}
        time.sleep(0.05)
        late += sizes != {p.name: p.stat().st_size for p in root.glob("f*")}
        for p in root.glob("f*"):
            p.unlink()
    assert late == 0, f"{late} of 5 killed actions wrote after run() returned"


@needs_bwrap
def test_an_action_cannot_make_a_user_namespace_of_its_own(box: Path) -> None:
    """In one it would hold CAP_SYS_ADMIN over mounts and namespaces: the kernel's largest surface for an escape."""
    iso = _sandboxed()
    hand_over(box / "root", iso)
    done = run(iso, ["sh", "-c", "unshare -Ur id -u; echo rc=$?"], SH, box / "root", ".", {}, 30, box)
    assert b"rc=0" not in done.stdout and b"unshare failed" in done.stderr, (done.stdout, done.stderr)


def test_a_lease_that_fails_unexpectedly_still_completes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever escapes execute_lease, its job ends with a status: a bot never waits on a job that died."""
    def boom(*_a: object, **_k: object) -> None:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(bots, "execute_lease", boom)
    job = bots._Job.__new__(bots._Job)
    job.lease_id, job.started = "lease-1", time.monotonic()
    job.done, job.cancelled, job.outcome = bots.threading.Event(), bots.threading.Event(), None
    settings = SimpleNamespace(allow=None, sandbox_dir=None, isolation=None, file_cache=None, offer=None)
    job._main(None, Digest.of_bytes(b""), settings)  # type: ignore[arg-type]
    assert job.done.is_set() and job.outcome is not None
    assert job.outcome.status.code == code_pb2.INTERNAL and "RecursionError" in job.outcome.status.message
