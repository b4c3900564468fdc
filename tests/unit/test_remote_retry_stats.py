"""Retries only for retryable codes, with capped jittered backoff; stats records round-trip and sum."""

from __future__ import annotations

import random
from pathlib import Path

import grpc
import pytest

from goma_ext.reapi import retry
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote import stats


class _Err(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode) -> None:
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "boom"


def test_retries_unavailable_then_succeeds_with_capped_delays() -> None:
    calls: list[float] = []
    sleeps: list[float] = []

    def fn(timeout: float) -> str:
        calls.append(timeout)
        if len(calls) < 3:
            raise _Err(grpc.StatusCode.UNAVAILABLE)
        return "ok"

    policy = retry.RetryPolicy(max_attempts=5, base_s=1.0, cap_s=1.5, timeout_s=7.0)
    assert retry.call("X", fn, policy, sleep=sleeps.append, rng=random.Random(1)) == "ok"
    assert calls == [7.0, 7.0, 7.0] and len(sleeps) == 2 and all(0 <= s <= 1.5 for s in sleeps)


@pytest.mark.parametrize(
    ("code", "temporary"),
    [(grpc.StatusCode.INVALID_ARGUMENT, False), (grpc.StatusCode.PERMISSION_DENIED, False),
     (grpc.StatusCode.DEADLINE_EXCEEDED, True)],
)
def test_non_retryable_codes_fail_at_once_with_a_typed_error(code: grpc.StatusCode, temporary: bool) -> None:
    calls = []

    def fn(timeout: float) -> None:
        calls.append(1)
        raise _Err(code)

    with pytest.raises(RemoteError) as e:
        retry.call("X", fn, retry.RetryPolicy(), sleep=lambda s: None)
    assert len(calls) == 1 and e.value.temporary is temporary and e.value.code == code.name


def test_retryable_codes_give_up_after_max_attempts() -> None:
    calls = []

    def fn(timeout: float) -> None:
        calls.append(1)
        raise _Err(grpc.StatusCode.UNAVAILABLE)

    with pytest.raises(RemoteError) as e:
        retry.call("X", fn, retry.RetryPolicy(max_attempts=3), sleep=lambda s: None)
    assert len(calls) == 3 and e.value.temporary


def test_stats_log_round_trips_and_sums(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    stats.append(log, stats.RunRecord("a.o", stats.Mode.REMOTE, 0, 1.0, 100, 150, 500, {"execute": 0.5}))
    stats.append(log, stats.RunRecord("b.o", stats.Mode.CACHE_HIT, 0, 0.2, 0, 150, 500, {"download": 0.1}))
    stats.append(log, stats.RunRecord("c.o", stats.Mode.FALLBACK, 1, 2.0, naive_bytes=None, reason="down"))
    s = stats.summarize(stats.read(log))
    assert s["runs"] == 3 and s["remote_executions"] == 1 and s["cache_hits"] == 1 and s["local_fallbacks"] == 1
    assert (s["bytes_uploaded"], s["input_bytes"], s["naive_upload_bytes"], s["naive_known_runs"]) == (100, 300, 1000, 2)
    assert s["failed"] == 1 and s["phase_s"] == {"download": 0.1, "execute": 0.5}


def test_torn_stats_line_is_reported_with_its_line_number(tmp_path: Path) -> None:
    log = tmp_path / "s.jsonl"
    log.write_text('{"output": "a"\n')
    with pytest.raises(RemoteError, match=":1:"):
        stats.read(log)
