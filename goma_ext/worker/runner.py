"""Run one lease: fetch Action and Command, check policy, materialise, run in a process group, upload results."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from google.protobuf.message import DecodeError, Message

from goma_ext.errors import GomaExtError
from goma_ext.remote.cas import Cas
from goma_ext.remote.digest import Digest
from goma_ext.remote.errors import RemoteError
from goma_ext.remote.merkle import BlobSource
from goma_ext.remote.proto import code_pb2, re_pb2, status_pb2
from goma_ext.worker import sandbox
from goma_ext.worker.errors import Refusal
from goma_ext.worker.policy import Allowlist

DEFAULT_TIMEOUT_S = 600


@dataclass(frozen=True)
class LeaseOutcome:
    """The status a lease is completed with, and the ActionResult when it ran."""

    status: status_pb2.Status
    result: re_pb2.ActionResult | None


def _status(code: int, message: str) -> status_pb2.Status:
    return status_pb2.Status(code=code, message=message)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _run(
    argv: list[str], exe: Path, cwd: Path, env: dict[str, str], timeout: float, logs: Path
) -> tuple[int, bytes, bytes]:
    out_path, err_path = logs / "stdout", logs / "stderr"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            argv,
            executable=str(exe),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        # A blocking waitpid plus a timer: Popen.wait(timeout) polls with sleeps of up to 50 ms.
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            _kill_group(proc)

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            code = proc.wait()
        except BaseException:
            _kill_group(proc)
            proc.wait()
            raise
        finally:
            timer.cancel()
        if expired.is_set():
            raise RemoteError(f"action exceeded its {timeout:.0f} s timeout", temporary=True, code="DEADLINE_EXCEEDED")
    return code, out_path.read_bytes(), err_path.read_bytes()


def load_action(cas: Cas, payload: re_pb2.Action | Digest) -> tuple[re_pb2.Action, re_pb2.Command]:
    if isinstance(payload, Digest):
        action = re_pb2.Action()
        _parse(action, cas.read(payload), "Action")
    else:
        action = payload
    command = re_pb2.Command()
    _parse(command, cas.read(Digest.from_proto(action.command_digest)), "Command")
    return action, command


def _parse(message: Message, data: bytes, what: str) -> None:
    try:
        message.ParseFromString(data)
    except DecodeError as e:
        raise Refusal(f"{what} blob does not decode: {e}", code_pb2.INVALID_ARGUMENT) from e


def execute_lease(cas: Cas, payload: re_pb2.Action | Digest, allow: Allowlist, scratch: Path) -> LeaseOutcome:
    """Never raises for a bad action or infrastructure trouble: every failure becomes a lease status."""
    box = scratch / f"sb-{os.getpid()}-{time.monotonic_ns()}"
    try:
        action, command = load_action(cas, payload)
        exe = allow.resolve(command, action.platform)
        outputs = list(command.output_paths) or list(command.output_files)
        box.mkdir(parents=True)
        root = box / "root"
        logs = box / "logs"
        logs.mkdir()
        root.mkdir()
        workdir = sandbox.inside(root, command.working_directory, "working directory")
        for out in outputs:
            sandbox.inside(root, os.path.join(command.working_directory, out), "output path")
        sandbox.materialise(cas, Digest.from_proto(action.input_root_digest), root)
        workdir = sandbox.inside(root, command.working_directory, "working directory")
        workdir.mkdir(parents=True, exist_ok=True)
        for out in outputs:
            (workdir / out).parent.mkdir(parents=True, exist_ok=True)
        env = {v.name: v.value for v in command.environment_variables}
        timeout = action.timeout.seconds or DEFAULT_TIMEOUT_S
        start = time.time()
        code, stdout, stderr = _run(list(command.arguments), exe, workdir, env, timeout, logs)
        result = re_pb2.ActionResult(exit_code=code)
        files, blobs = sandbox.collect_outputs(workdir, root, outputs)
        result.output_files.extend(files)
        out_d, err_d = (Digest.of_bytes(b) for b in (stdout, stderr))
        cas.upload({**blobs, out_d: BlobSource(data=stdout), err_d: BlobSource(data=stderr)})
        result.stdout_digest.CopyFrom(out_d.to_proto())
        result.stderr_digest.CopyFrom(err_d.to_proto())
        result.execution_metadata.worker_start_timestamp.FromSeconds(int(start))
        return LeaseOutcome(_status(code_pb2.OK, ""), result)
    except Refusal as e:
        return LeaseOutcome(_status(e.code, f"goma-ext worker refused the action: {e}"), None)
    except RemoteError as e:
        code = code_pb2.DEADLINE_EXCEEDED if e.code == "DEADLINE_EXCEEDED" else code_pb2.UNAVAILABLE
        return LeaseOutcome(_status(code, str(e)), None)
    except (GomaExtError, OSError) as e:
        return LeaseOutcome(_status(code_pb2.INTERNAL, f"worker failure: {e}"), None)
    finally:
        shutil.rmtree(box, ignore_errors=True)
