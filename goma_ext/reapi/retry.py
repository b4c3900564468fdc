"""Deadlines and retries for unary RPCs: capped exponential backoff with full jitter, retryable codes only."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

from goma_ext.reapi.errors import RemoteError

T = TypeVar("T")

# Codes where the same request may succeed later (BuildGrid/BuildStream practice).
RETRYABLE = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED, grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL}
)
# Codes that say the infrastructure, not the request, failed: worth a local fallback but not a retry.
TEMPORARY = RETRYABLE | {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry one RPC."""

    max_attempts: int = 4
    base_s: float = 0.1
    cap_s: float = 2.0
    timeout_s: float = 30.0
    # A streamed blob's deadline grows with its size: a compiler's 129 MB library that a loaded server compresses
    # for each reader (`--compression gzip`) outlived 30 s, and every retry started it over.
    stream_floor_bytes_per_s: float = float(1 << 20)

    def stream_timeout(self, size: int) -> float:
        """The deadline of one ByteStream call moving SIZE bytes: timeout_s, plus a second per floor's bytes."""
        return self.timeout_s + size / self.stream_floor_bytes_per_s

    def delay(self, attempt: int, rng: random.Random) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**attempt)]."""
        return rng.uniform(0.0, min(self.cap_s, self.base_s * (2**attempt)))


def to_remote_error(what: str, e: grpc.RpcError) -> RemoteError:
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = e.details() if hasattr(e, "details") else str(e)
    return RemoteError(f"{what}: {code.name}: {details}", temporary=code in TEMPORARY, code=code.name)


def call(
    what: str,
    fn: Callable[[float], T],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: random.Random | None = None,
    timeout_s: float | None = None,
) -> T:
    """Call `fn(timeout)` (TIMEOUT_S, else the policy's); retry RETRYABLE failures, raise a RemoteError for
    everything else."""
    rng = rng or random.Random()
    for attempt in range(policy.max_attempts):
        try:
            return fn(policy.timeout_s if timeout_s is None else timeout_s)
        except grpc.RpcError as e:
            err = to_remote_error(what, e)
            code = e.code() if hasattr(e, "code") else None
            if code not in RETRYABLE or attempt + 1 == policy.max_attempts:
                raise err from e
            sleep(policy.delay(attempt, rng))
    raise RemoteError(f"{what}: no attempts made", temporary=True)
