"""The proxy's shared state in isolation: in-flight de-duplication, merged CAS uploads and reads, the file digest
memo."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import cast

from goma_ext.proxy.shared import DigestMemo, Inflight, ReadBatcher, UploadBatcher
from goma_ext.reapi.cas import Cas
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
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
    assert batcher.requests == 20 and batcher.rounds == len(cas.rounds) < 20
    assert sum(sent) == sum(d.size for d in cas.present)  # the shared blob is attributed to one action only


class _SlowReads:
    """Stands in for the CAS client's reads: each round takes a while; LOST blobs are not there (NOT_FOUND), and
    with DOWN every read fails as a server that is away does."""

    max_batch_bytes = 8 * (256 + 2)  # a batch holds 8 of the tests' small blobs

    def __init__(self, lost: set[Digest], down: bool = False) -> None:
        self.rounds: list[set[Digest]] = []
        self.lost = lost
        self.down = down
        self.in_flight = 0
        self.most_in_flight = 0
        self._lock = threading.Lock()

    def fits_batch(self, digest: Digest) -> bool:
        return digest.size < 100

    def read_many(self, digests: Iterable[Digest]) -> dict[Digest, bytes]:
        wanted = set(digests)
        with self._lock:
            self.rounds.append(wanted)
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        time.sleep(0.05)
        with self._lock:
            self.in_flight -= 1
        if self.down:
            raise RemoteError("BatchReadBlobs: UNAVAILABLE", temporary=True, code="UNAVAILABLE")
        if wanted & self.lost:
            raise RemoteError(f"BatchReadBlobs {min(wanted & self.lost)}: NOT_FOUND", temporary=True,
                              code="NOT_FOUND")
        return {d: str(int(d.size)).encode() for d in wanted}


LARGE = Digest("ab" * 32, 500)  # beyond _SlowReads' batch size: streamed by its caller


def _read_concurrently(reads: ReadBatcher, callers: Iterable[int]) -> dict[int, object]:
    got: dict[int, object] = {}

    def one(i: int) -> None:
        try:
            got[i] = reads.read_many([_digest(i), _digest(0), LARGE])
        except RemoteError as e:
            got[i] = e

    threads = [threading.Thread(target=one, args=(i,)) for i in callers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return got


def test_concurrent_reads_share_rounds_of_one_batch_several_in_flight() -> None:
    cas = _SlowReads(set())
    reads = ReadBatcher(cast(Cas, cas))
    got = _read_concurrently(reads, range(1, 21))
    assert all(isinstance(r, dict) and set(r) == {_digest(i), _digest(0), LARGE} for i, r in got.items()), got
    assert reads.requests == 20 and reads.rounds < 20
    assert max(len(r) for r in cas.rounds) <= 8 and cas.most_in_flight > 1  # one batch a round, several at once
    assert all(LARGE not in r or r == {LARGE} for r in cas.rounds)  # streamed by its caller, alone


def test_a_lost_blob_in_a_merged_round_fails_its_action_alone() -> None:
    lost = _digest(7)
    cas = _SlowReads({lost})
    gate = threading.Event()
    entered = threading.Event()
    read = cas.read_many

    def gated(digests: Iterable[Digest]) -> dict[Digest, bytes]:
        entered.set()
        gate.wait(10)
        return read(digests)

    cas.read_many = gated  # type: ignore[method-assign]
    reads = ReadBatcher(cast(Cas, cas), threads=1)
    def until(done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 10
        while not done() and time.monotonic() < deadline:
            time.sleep(0.01)

    results: dict[int, object] = {}

    def start(callers: list[int]) -> threading.Thread:
        thread = threading.Thread(target=lambda: results.update(_read_concurrently(reads, callers)))
        thread.start()
        return thread

    callers = [start([100])]  # the one round thread held at the gate: everything after it waits, in order
    until(entered.is_set)
    callers.append(start([i for i in range(1, 21) if i != 7]))
    until(lambda: len(reads._rounds._pending) == 19)
    callers.append(start([7]))  # last: in the last round, with three others
    until(lambda: len(reads._rounds._pending) == 20)
    gate.set()
    for thread in callers:
        thread.join(10)
    results.pop(100)
    assert isinstance(results.pop(7), RemoteError) and len(results) == 19
    assert all(isinstance(r, dict) for r in results.values()), results
    assert any(lost in r and len(r) > 2 for r in cas.rounds)  # the lost blob was in a round with others' blobs


def test_a_server_away_fails_a_read_round_at_once_without_reading_again_per_action() -> None:
    cas = _SlowReads(set(), down=True)
    got = _read_concurrently(ReadBatcher(cast(Cas, cas)), range(1, 11))
    assert len(got) == 10 and all(isinstance(r, RemoteError) and r.code == "UNAVAILABLE" for r in got.values())
    merged = [r for r in cas.rounds if r != {LARGE}]
    assert len(merged) < 10  # no round per action after a failed one


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
