"""Run one lease: fetch Action and Command, check policy, materialise, run it isolated, upload results."""

from __future__ import annotations

import logging
import os
import posixpath
import secrets
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from google.protobuf import struct_pb2
from google.protobuf.message import DecodeError, Message

from goma_ext.errors import GomaExtError
from goma_ext.reapi.cas import Cas
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import code_pb2, re_pb2, status_pb2
from goma_ext.worker import beneath, exec_root, sandbox
from goma_ext.worker.errors import Refusal
from goma_ext.worker.filecache import FileCache
from goma_ext.worker.forklock import FORK_LOCK
from goma_ext.worker.inputtree import Deadline, TreeBounds, check_digest, check_message_size, too_large
from goma_ext.worker.policy import NO_OFFER, Allowlist, Offer, is_input_program, requested
from goma_ext.worker.sandbox import ExecFailed, Exhausted, Isolation
from thinlto_base import safefs

DEFAULT_TIMEOUT_S = 600
PATH_MAX, NAME_MAX = 4096, 255  # Linux's, for a path and for one of its names
LOG = logging.getLogger("goma_ext.worker")


@dataclass(frozen=True)
class LeaseOutcome:
    """The status a lease is completed with, and the ActionResult when it ran."""

    status: status_pb2.Status
    result: re_pb2.ActionResult | None


def _status(code: int, message: str) -> status_pb2.Status:
    return status_pb2.Status(code=code, message=message)


def load_action(cas: Cas, payload: re_pb2.Action | Digest) -> tuple[re_pb2.Action, re_pb2.Command]:
    if isinstance(payload, Digest):
        action = re_pb2.Action()
        _parse(action, cas.read(check_message_size(payload, "the Action")), "Action")
    else:
        action = payload
    command = re_pb2.Command()
    digest = check_message_size(check_digest(action.command_digest, "the action's command"), "the Command")
    _parse(command, cas.read(digest), "Command")
    return action, command


def _parse(message: Message, data: bytes, what: str) -> None:
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise Refusal(f"{what} blob does not decode: {e}", code_pb2.INVALID_ARGUMENT) from e


def _hand_over(root_fd: int, iso: Isolation, outputs: Sequence[str] = ()) -> None:
    """Make the input root's DIRECTORIES the runner uid's (it writes outputs there, and may replace an input by a
    new file); input files stay the worker's and read-only to the action: many are hard links to the shared file
    cache, whose inodes an action must never own. An input at a declared output path (ranlib, strip in place)
    becomes a private copy the runner owns. `outputs` are relative to the input root, their parents exist. Every
    step goes through descriptors and follows no link (goma_ext/worker/beneath.py): the tree's names came from the
    action. The worker, root, still reads and deletes everything afterwards."""
    if iso.run_as is None:
        return
    uid, gid = iso.run_as.uid, iso.run_as.gid
    for out in outputs:
        _own_copy(root_fd, out, uid, gid)
    beneath.chown_dirs(root_fd, uid, gid)


def hand_over(root: Path, iso: Isolation) -> None:
    """_hand_over for a tree named by path (the probe, tests)."""
    with beneath.root_dir(root) as root_fd:
        _hand_over(root_fd, iso)


def _own_copy(root_fd: int, out: str, uid: int, gid: int) -> None:
    """Replace the regular file at `out` (if any) by a copy that uid:gid owns, with the same execute bit."""
    parent, name = beneath.parent_and_name(out, "output path")
    with beneath.opened_dir(root_fd, parent, "output path") as dir_fd:
        try:
            src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return  # absent, or a symlink (refused when outputs are collected): nothing to own
        try:
            st = os.fstat(src)
            if not stat.S_ISREG(st.st_mode):
                return
            own = f".{name}.{secrets.token_hex(8)}.gx-own"
            mode = 0o755 if st.st_mode & stat.S_IXUSR else 0o644
            with FORK_LOCK:
                dst = os.open(own, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode,
                              dir_fd=dir_fd)
                try:
                    safefs.copy_fd(src, dst)
                    os.fchmod(dst, mode)
                    os.fchown(dst, uid, gid)
                finally:
                    os.close(dst)
            os.replace(own, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            os.close(src)


def remove_box(box: Path) -> None:
    """Delete a sandbox directory, also when the action left directories without write or search permission (a
    worker that is not root needs them back), or a tree deeper than Python's recursion (an action can make one).

    shutil.rmtree walks by descriptors and follows no link. Its retry, for a worker that is not root, opens what
    it chmods with O_NOFOLLOW, but walks the path's other components as names: an action running as that same
    uid gains nothing by a link there. Root needs no retry (no permission stops it), and must not follow a path
    an action may still be changing: what rmtree could not remove is left to `rm`, which walks by descriptors at
    any depth and stays on the box's file system."""

    def retry(_fn: object, path: str, _exc: object) -> None:
        if os.geteuid() == 0:
            return
        try:
            for d in (os.path.dirname(path), path):
                try:
                    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    os.fchmod(fd, stat.S_IRWXU)
                finally:
                    os.close(fd)
            if stat.S_ISDIR(os.lstat(path).st_mode):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass

    try:
        shutil.rmtree(box, onerror=retry)
    except RecursionError:
        pass
    if os.path.lexists(box):
        with FORK_LOCK:  # (forklock.py)
            rm = subprocess.Popen(["rm", "-rf", "--one-file-system", "--", str(box)], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
        rm.wait()
    if os.path.lexists(box):  # a worker that is not root, below a directory it cannot enter at that depth
        LOG.warning("could not remove the sandbox directory %s", box)


def _new_box(scratch: Path) -> Path:
    """A per-action directory with an unpredictable name: BOX (0711, the worker's: the runner uid reaches BOX/root
    only, nobody lists it) and BOX/root (0700; the runner uid's once handed over, so no other local user reads an
    action's inputs or outputs). Streams are unnamed files in BOX itself."""
    box = Path(tempfile.mkdtemp(prefix="sb-", dir=scratch))
    os.chmod(box, 0o711)
    (box / "root").mkdir(mode=0o700)
    return box


def probe_command(iso: Isolation) -> list[str]:
    """What the start-up probe runs: the host's /usr/bin/true, or with a base root its dynamic loader's
    `--version` (every base root has the loader, which every dynamically linked program needs; coreutils need
    not be there)."""
    if iso.base_root is None:
        return ["/usr/bin/true"]
    for pattern in ("usr/lib64/ld-linux*.so*", "usr/lib/ld-linux*.so*", "usr/lib/*/ld-linux*.so*"):
        for found in sorted(iso.base_root.glob(pattern)):
            return ["/" + found.relative_to(iso.base_root).as_posix(), "--version"]
    raise sandbox.SandboxError(f"base root {iso.base_root} has no dynamic loader (usr/lib*/ld-linux*.so*)")


def probe(iso: Isolation, scratch: Path) -> str | None:
    """Run probe_command() in the configured sandbox once; why it does not work, or None."""
    if iso.mode is sandbox.IsolationMode.NONE:
        return None
    box = None
    try:
        argv = probe_command(iso)
        box = _new_box(scratch)
        hand_over(box / "root", iso)
        done = sandbox.run(iso, argv, None, box / "root", ".", {}, 30.0, box)
        if done.exit_code != 0:
            why = done.stderr.decode(errors="replace").strip()
            return f"{' '.join(argv)} exited with {done.exit_code} in the sandbox: {why}"
        return None
    except (GomaExtError, RemoteError, OSError) as e:
        return str(e)
    finally:
        if box is not None:
            remove_box(box)


def _program(command: re_pb2.Command, action: re_pb2.Action, allow: Allowlist, iso: Isolation) -> Path | None:
    """The host compiler serving a bare-name argv[0], or None for a program shipped in the input root (checked
    once the root is materialised)."""
    if not command.arguments:
        raise Refusal("command has no arguments")
    if not is_input_program(command.arguments[0]):
        return allow.resolve(command, action.platform)
    if not allow.input_programs:
        raise Refusal(f"its program {command.arguments[0]!r} comes from the input root, and this worker runs only "
                      "allow-listed compilers (--no-input-programs)")
    if iso.mode is sandbox.IsolationMode.NONE:
        raise Refusal(f"its program {command.arguments[0]!r} comes from the input root, and this worker "
                      "(--isolation none) would run an uploaded program unsandboxed", code_pb2.FAILED_PRECONDITION)
    return None


def _with_note(message: str, iso: Isolation) -> str:
    return f"{message} ({iso.note})" if iso.note and message else message or iso.note


def _metadata(result: re_pb2.ActionResult, placed: exec_root.Materialised) -> None:
    """How the inputs were placed, in the result (auxiliary metadata: a Struct) and the worker's log."""
    counts = {"input_files": placed.files, "input_files_from_cache": placed.cached,
              "input_bytes_from_cache": placed.cached_bytes, "input_files_fetched": placed.fetched,
              "input_bytes_fetched": placed.fetched_bytes}
    aux = struct_pb2.Struct()
    aux.update({f"goma_ext.{k}": v for k, v in counts.items()})
    result.execution_metadata.auxiliary_metadata.add().Pack(aux)
    LOG.info("inputs: %s", " ".join(f"{k}={v}" for k, v in counts.items()))


def _bounds(limits: sandbox.Limits) -> TreeBounds:
    return TreeBounds(nodes=limits.input_nodes or sys.maxsize, file_bytes=limits.input_bytes or sys.maxsize,
                      depth=limits.input_depth or exec_root.MAX_DEPTH)


def _check_command(command: re_pb2.Command) -> None:
    """Refuse arguments and environment variables the sandbox cannot pass as they are: a NUL byte ends a C string
    (bwrap reads its options NUL-separated, so a NUL in a value would add options of the client's choice), and a
    name must be one (not empty, no '=')."""
    for i, arg in enumerate(command.arguments):
        if "\0" in arg:
            raise Refusal(f"argument {i} holds a NUL byte", code_pb2.INVALID_ARGUMENT)
    for var in command.environment_variables:
        if not var.name or "=" in var.name or "\0" in var.name:
            raise Refusal(f"environment variable name {var.name!r} is not a name (empty, '=' or a NUL byte)",
                          code_pb2.INVALID_ARGUMENT)
        if "\0" in var.value:
            raise Refusal(f"environment variable {var.name!r} holds a NUL byte", code_pb2.INVALID_ARGUMENT)


def _check_outputs(command: re_pb2.Command, limits: sandbox.Limits) -> dict[str, str]:
    """The declared outputs: each one's path relative to the input root -> its name as declared (relative to the
    working directory). Refused before any work: too many, or escaping the input root."""
    outputs = list(command.output_paths) or list(command.output_files)
    if limits.outputs and len(outputs) > limits.outputs:
        raise too_large(f"the action declares {len(outputs)} outputs, more than {limits.outputs} (the worker's "
                        "--max-outputs)")
    workdir = command.working_directory
    beneath.components(workdir, "working directory")
    depth = limits.input_depth or exec_root.MAX_DEPTH
    found = {}
    # The directories the worker makes for them count against the node bound, as the input tree's do: 10,000
    # outputs 63 levels deep would otherwise be 630,000 mkdirs before the action starts. Counted as a trie of
    # (parent's number, name): a prefix's text is never copied (a 16 MiB Command's prefixes would be gigabytes).
    parents: dict[tuple[int, str], int] = {}
    for out in outputs:
        rel = posixpath.join(workdir, out)
        exec_root.inside(Path("/"), rel, "output path")  # textual: '..' out of the tree, absolute
        norm = posixpath.normpath(rel)
        # the worker makes an output's parents before the action runs: as deep as an input tree may be, no deeper
        parts = norm.split("/")
        if len(parts) > depth or len(norm.encode()) > PATH_MAX or any(len(c.encode()) > NAME_MAX for c in parts):
            raise Refusal(f"output path {out!r} is deeper than {depth} directories or longer than the file system "
                          f"allows ({PATH_MAX} bytes, {NAME_MAX} a name)", code_pb2.INVALID_ARGUMENT)
        found[norm] = out
        node = 0
        for name in parts[:-1]:
            node = parents.setdefault((node, name), len(parents) + 1)
        if limits.input_nodes and len(parents) > limits.input_nodes:
            raise too_large(f"the action's output paths need more than {limits.input_nodes} directories (the "
                            "worker's --max-input-nodes)")
    return found


def execute_lease(
    cas: Cas, payload: re_pb2.Action | Digest, allow: Allowlist, scratch: Path, iso: Isolation,
    cancel: threading.Event | None = None, file_cache: FileCache | None = None, offer: Offer = NO_OFFER,
) -> LeaseOutcome:
    """Never raises for a bad action or infrastructure trouble: every failure becomes a lease status."""
    box: Path | None = None
    exe: Path | None = None
    collected: exec_root.Outputs | None = None
    try:
        action, command = load_action(cas, payload)
        _check_command(command)
        offer.check(requested(action, command))
        exe = _program(command, action, allow, iso)
        outputs = _check_outputs(command, iso.limits)
        timeout = float(action.timeout.seconds or DEFAULT_TIMEOUT_S)
        timeout = min(timeout, iso.limits.wall_s) if iso.limits.wall_s else timeout
        deadline = Deadline(time.monotonic() + timeout)  # materialising counts against the action's time
        box = _new_box(scratch)
        root = box / "root"
        fetch_start = time.time()
        placed = exec_root.materialise(
            cas, check_digest(action.input_root_digest, "the action's input root"), root, file_cache,
            share=iso.run_as is not None,
            bounds=_bounds(iso.limits), deadline=deadline)
        fetch_done = time.time()
        workdir = command.working_directory
        with beneath.root_dir(root) as root_fd:
            os.close(beneath.open_dir(root_fd, workdir, "working directory", create=True))
            for out in outputs:
                os.close(beneath.open_dir(root_fd, posixpath.dirname(out), "output path", create=True))
            if exe is None:
                exec_root.input_program(root, workdir, command.arguments[0])
            _hand_over(root_fd, iso, list(outputs))
            env = {v.name: v.value for v in command.environment_variables}
            start = time.time()
            rel = posixpath.normpath(workdir) if workdir else "."
            done = sandbox.run(iso, list(command.arguments), exe, root, rel, env, deadline.remaining() or 0.001,
                                 box, cancel)
            result = re_pb2.ActionResult(exit_code=done.exit_code)
            _metadata(result, placed)
            result.execution_metadata.input_fetch_start_timestamp.FromNanoseconds(int(fetch_start * 1e9))
            result.execution_metadata.input_fetch_completed_timestamp.FromNanoseconds(int(fetch_done * 1e9))
            collected = exec_root.collect_outputs(root_fd, outputs, iso.limits.output_bytes)
        result.output_files.extend(collected.files)
        out_d, err_d = (Digest.of_bytes(b) for b in (done.stdout, done.stderr))
        cas.upload({**collected.blobs, out_d: BlobSource(data=done.stdout), err_d: BlobSource(data=done.stderr)})
        result.stdout_digest.CopyFrom(out_d.to_proto())
        result.stderr_digest.CopyFrom(err_d.to_proto())
        result.execution_metadata.worker_start_timestamp.FromSeconds(int(start))
        result.execution_metadata.worker = iso.note
        return LeaseOutcome(_status(code_pb2.OK, iso.note), result)
    except Refusal as e:
        return LeaseOutcome(_status(e.code, _with_note(f"goma-ext worker refused the action: {e}", iso)), None)
    except Exhausted as e:
        return LeaseOutcome(_status(code_pb2.RESOURCE_EXHAUSTED, _with_note(f"goma-ext worker: {e}", iso)), None)
    except ExecFailed as e:
        code = code_pb2.INVALID_ARGUMENT if exe is None else code_pb2.INTERNAL  # an uploaded program: its fault
        return LeaseOutcome(_status(code, _with_note(f"goma-ext worker: {e}", iso)), None)
    except RemoteError as e:
        code = {"DEADLINE_EXCEEDED": code_pb2.DEADLINE_EXCEEDED, "CANCELLED": code_pb2.CANCELLED}.get(
            e.code or "", code_pb2.UNAVAILABLE)
        return LeaseOutcome(_status(code, _with_note(str(e), iso)), None)
    except (GomaExtError, OSError) as e:
        return LeaseOutcome(_status(code_pb2.INTERNAL, _with_note(f"worker failure: {e}", iso)), None)
    finally:
        if collected is not None:
            collected.close()
        if box is not None:
            remove_box(box)

