"""ActionCache lookups and Execute streams that survive broken connections via WaitExecution."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import cast

import grpc

from goma_ext.reapi import retry
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.proto import code_pb2, operations_pb2, re_grpc, re_pb2


def lookup(
    channel: grpc.Channel,
    instance: str,
    metadata: tuple[tuple[str, str], ...],
    action: Digest,
    policy: retry.RetryPolicy,
) -> re_pb2.ActionResult | None:
    """The cached ActionResult for `action`, or None on a miss."""
    stub = re_grpc.ActionCacheStub(channel)
    req = re_pb2.GetActionResultRequest(
        instance_name=instance, action_digest=action.to_proto(), inline_stdout=True, inline_stderr=True
    )
    try:
        return retry.call("GetActionResult", lambda t: stub.GetActionResult(req, timeout=t, metadata=metadata), policy)
    except RemoteError as e:
        if e.code == grpc.StatusCode.NOT_FOUND.name:
            return None
        raise


def _done(op: operations_pb2.Operation) -> re_pb2.ExecuteResponse:
    if op.HasField("error"):
        raise RemoteError(f"execution {op.name} failed: {op.error.message or op.error.code}", temporary=True)
    resp = re_pb2.ExecuteResponse()
    if not op.response.Unpack(resp):
        raise RemoteError(f"execution {op.name}: response is not an ExecuteResponse", temporary=True)
    if resp.status.code != code_pb2.OK:
        code = cast("code_pb2.Code.ValueType", resp.status.code)
        name = code_pb2.Code.Name(code) if code in code_pb2.Code.values() else "UNKNOWN"
        raise RemoteError(f"execution {op.name}: {name}: {resp.status.message}", temporary=True, code=name)
    return resp


def _follow(
    stream: Iterable[operations_pb2.Operation], names: list[str], queue_deadline: float
) -> re_pb2.ExecuteResponse | None:
    """Read operations until done; give up if no worker has started the action by `queue_deadline`."""
    started = False
    for op in stream:
        if op.name and not names:
            names.append(op.name)
        if op.done:
            return _done(op)
        meta = re_pb2.ExecuteOperationMetadata()
        if op.metadata.Unpack(meta) and meta.stage >= re_pb2.ExecutionStage.EXECUTING:
            started = True
        if not started and time.monotonic() > queue_deadline:
            raise RemoteError(f"no worker started {op.name} in time (queued too long)", temporary=True, code="QUEUED")
    return None


def execute(
    channel: grpc.Channel,
    instance: str,
    metadata: tuple[tuple[str, str], ...],
    action: Digest,
    policy: retry.RetryPolicy,
    total_timeout_s: float,
    queue_timeout_s: float | None = None,
) -> re_pb2.ExecuteResponse:
    """Execute (cache already checked) and wait for the result; reconnect with WaitExecution when the stream breaks."""
    stub = re_grpc.ExecutionStub(channel)
    deadline = time.monotonic() + total_timeout_s
    queue_deadline = time.monotonic() + (queue_timeout_s if queue_timeout_s is not None else total_timeout_s)
    names: list[str] = []
    failures = 0
    rng = random.Random()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RemoteError(
                f"execution of {action} exceeded {total_timeout_s:.0f} s", temporary=True, code="DEADLINE"
            )
        try:
            if names:
                stream = stub.WaitExecution(
                    re_pb2.WaitExecutionRequest(name=names[0]), timeout=remaining, metadata=metadata
                )
            else:
                req = re_pb2.ExecuteRequest(
                    instance_name=instance, action_digest=action.to_proto(), skip_cache_lookup=True
                )
                stream = stub.Execute(req, timeout=remaining, metadata=metadata)
            result = _follow(stream, names, queue_deadline)
            if result is not None:
                return result
            err: RemoteError = RemoteError("execution stream ended before the operation finished", temporary=True)
        except grpc.RpcError as e:
            err = retry.to_remote_error("Execute" if not names else "WaitExecution", e)
            if e.code() == grpc.StatusCode.NOT_FOUND and names:
                names.clear()  # the server forgot the operation: execute again
            elif e.code() not in retry.RETRYABLE:
                raise err from e
        failures += 1
        if failures >= policy.max_attempts:
            raise err
        time.sleep(policy.delay(failures, rng))
