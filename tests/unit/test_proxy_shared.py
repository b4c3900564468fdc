"""The proxy's shared state in isolation: in-flight de-duplication, merged CAS uploads, the file digest memo."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import pytest

from goma_ext.proxy.shared import DigestMemo, Inflight, UploadBatcher
from goma_ext.reapi.cas import Cas
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.merkle import BlobSource


def _digest(n: int) -> Digest:
    return Digest.of_bytes(str(n).encode())


def test_identical_concurrent_work_runs_once() -> None:
    inflight: Inflight[int] = Inflight()
    started = threading.Event()
    release = threading.Event()
    runs = []

    def work() -> int:
        runs.append(1)
        started.set()
        release.wait(5)
        return 42

    results: list[tuple[int, bool]] = []
    first = threading.Thread(target=lambda: results.append(inflight.once(_digest(1), work)))
    first.start()
    started.wait(5)
    others = [threading.Thread(target=lambda: results.append(inflight.once(_digest(1), work))) for _ in range(3)]
    for t in others:
        t.start()
    time.sleep(0.1)
    release.set()
    for t in [first, *others]:
        t.join(5)
    assert len(runs) == 1 and sorted(results) == [(42, False), (42, True), (42, True), (42, True)]
    assert inflight.joined == 3
    assert inflight.once(_digest(1), lambda: 7) == (7, False)  # finished work is not remembered


class _SlowCas:
    """Stands in for the CAS client: each round takes a while, so requests pile up behind it."""

    def __init__(self) -> None:
        self.rounds: list[set[Digest]] = []
        self.present: set[Digest] = set()

    def upload_missing(self, blobs: Mapping[Digest, BlobSource]) -> set[Digest]:
        self.rounds.append(set(blobs))
        time.sleep(0.05)
        missing = set(blobs) - self.present
        self.present |= missing
        return missing

    def forget_present(self) -> None:
        self.present.clear()


def test_concurrent_uploads_share_rounds_and_each_blob_is_counted_once() -> None:
    cas = _SlowCas()
    batcher = UploadBatcher(cast(Cas, cas))
    shared = _digest(0)
    sent: list[int] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        n = batcher.ensure({shared: BlobSource(data=b"0"), _digest(i): BlobSource(data=str(i).encode())})
        with lock:
            sent.append(n)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(1, 21)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert batcher.requests == 20 and batcher.flushes == len(cas.rounds) < 20
    assert sum(sent) == sum(d.size for d in cas.present)  # the shared blob is attributed to one action only


def test_an_upload_thread_that_cannot_start_strands_no_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The caller whose thread start failed gets the error; the next caller starts the thread and is served."""
    cas = _SlowCas()
    batcher = UploadBatcher(cast(Cas, cas))
    start = threading.Thread.start
    failed: list[bool] = []

    def once_failing(self: threading.Thread) -> None:
        if not failed:
            failed.append(True)
            raise RuntimeError("can't start new thread")
        start(self)

    monkeypatch.setattr(threading.Thread, "start", once_failing)
    with pytest.raises(RuntimeError, match="can't start new thread"):
        batcher.ensure({_digest(1): BlobSource(data=b"1")})
    assert batcher.ensure({_digest(2): BlobSource(data=b"2")}) == 1 and cas.rounds == [{_digest(2)}]


def test_digest_memo_hashes_a_file_once_until_it_changes(tmp_path: Path) -> None:
    memo = DigestMemo()
    f = tmp_path / "x.o"
    f.write_bytes(b"one")
    assert memo(f, os.stat(f)) == Digest.of_bytes(b"one") and memo(f, os.stat(f)) and memo.misses == 2  # just written
    old = time.time_ns() - 10**9
    os.utime(f, ns=(old, old))
    time.sleep(0.15)  # ctime, which utime sets to now, must be older than the racy window too
    memo = DigestMemo()
    assert memo(f, os.stat(f)) == Digest.of_bytes(b"one")
    assert memo(f, os.stat(f)) == Digest.of_bytes(b"one") and (memo.hits, memo.misses) == (1, 1)
    f.write_bytes(b"two!")
    assert memo(f, os.stat(f)) == Digest.of_bytes(b"two!") and memo.misses == 2
