"""CAS client against an in-process fake server: chunking, batching, ByteStream, digest matching and checks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from goma_ext.reapi import cas as cas_mod
from goma_ext.reapi.capabilities import ServerLimits
from goma_ext.reapi.cas import Cas
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import DigestMismatchError, RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import bs_grpc, bs_pb2, code_pb2, re_grpc, re_pb2
from goma_ext.reapi.retry import RetryPolicy


@dataclass
class FakeCas(re_grpc.ContentAddressableStorageServicer, bs_grpc.ByteStreamServicer):
    blobs: dict[str, bytes] = field(default_factory=dict)
    find_sizes: list[int] = field(default_factory=list)
    batch_updates: list[int] = field(default_factory=list)
    stream_writes: list[str] = field(default_factory=list)
    corrupt: bool = False
    fail_update: bool = False
    flood: int = 0  # chunks of 1 MiB a Read sends after the blob (a hostile server)
    flood_sent: int = 0
    stream_deadlines: list[float] = field(default_factory=list)  # seconds left when a ByteStream call began

    def FindMissingBlobs(self, request, context):  # noqa: N802
        self.find_sizes.append(len(request.blob_digests))
        missing = [d for d in request.blob_digests if d.hash not in self.blobs]
        return re_pb2.FindMissingBlobsResponse(missing_blob_digests=list(reversed(missing)))

    def BatchUpdateBlobs(self, request, context):  # noqa: N802
        self.batch_updates.append(len(request.requests))
        resp = re_pb2.BatchUpdateBlobsResponse()
        for r in reversed(request.requests):
            self.blobs[r.digest.hash] = r.data
            code = code_pb2.INVALID_ARGUMENT if self.fail_update else code_pb2.OK
            resp.responses.add(digest=r.digest, status={"code": code})
        return resp

    def BatchReadBlobs(self, request, context):  # noqa: N802
        resp = re_pb2.BatchReadBlobsResponse()
        for d in reversed(request.digests):
            data = self.blobs.get(d.hash, b"")
            resp.responses.add(digest=d, data=(b"X" + data[1:]) if self.corrupt else data, status={"code": 0})
        return resp

    def Write(self, request_iterator: Iterator[bs_pb2.WriteRequest], context):  # noqa: N802
        self.stream_deadlines.append(context.time_remaining())
        name, data, finished = "", b"", False
        for r in request_iterator:
            name = name or r.resource_name
            data += r.data
            finished = r.finish_write
        self.stream_writes.append(name)
        if finished:  # as a real CAS: a stream the client abandons (cancelled, on some runs ended) commits nothing
            self.blobs[name.split("/")[-2]] = data
        return bs_pb2.WriteResponse(committed_size=len(data))

    def Read(self, request, context):  # noqa: N802
        self.stream_deadlines.append(context.time_remaining())
        data = self.blobs[request.resource_name.split("/")[-2]]
        data = (b"X" + data[1:]) if self.corrupt else data
        for i in range(0, max(len(data), 1), 1 << 20):  # 1 MiB a message, as a server streams it
            yield bs_pb2.ReadResponse(data=data[i:i + (1 << 20)])
        for _ in range(self.flood):
            self.flood_sent += 1
            yield bs_pb2.ReadResponse(data=b"\0" * (1 << 20))


@pytest.fixture
def fake() -> Iterator[tuple[FakeCas, Cas]]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    f = FakeCas()
    re_grpc.add_ContentAddressableStorageServicer_to_server(f, server)
    bs_grpc.add_ByteStreamServicer_to_server(f, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    limits = ServerLimits(max_batch_bytes=4096, exec_enabled=True, cache_update_enabled=True)
    yield f, Cas(channel, "inst", (), limits, RetryPolicy(max_attempts=1, timeout_s=5))
    channel.close()
    server.stop(None)


def _blobs(*datas: bytes) -> dict[Digest, BlobSource]:
    return {Digest.of_bytes(d): BlobSource(data=d) for d in datas}


def test_small_blobs_batch_large_ones_stream_and_each_uploads_once(fake: tuple[FakeCas, Cas]) -> None:
    f, cas = fake
    small = [bytes([i]) * 1000 for i in range(7)]
    big = b"L" * 10_000
    sent = cas.upload(_blobs(*small, big))
    assert sent == 7 * 1000 + 10_000
    assert sum(f.batch_updates) == 7 and max(f.batch_updates) <= 3  # 4 KiB batches
    assert len(f.stream_writes) == 1 and f.stream_writes[0].startswith("inst/uploads/")
    assert cas.upload(_blobs(*small, big)) == 0
    assert len(f.find_sizes) == 1  # second upload asked nothing: remembered per Cas object


def test_find_missing_is_chunked(fake: tuple[FakeCas, Cas], monkeypatch: pytest.MonkeyPatch) -> None:
    f, cas = fake
    monkeypatch.setattr(cas_mod, "FIND_MISSING_CHUNK", 10)
    digests = [Digest.of_bytes(str(i).encode()) for i in range(25)]
    assert cas.find_missing(digests) == set(digests)
    assert f.find_sizes == [10, 10, 5]


def test_reads_match_responses_by_digest_and_verify_content(fake: tuple[FakeCas, Cas]) -> None:
    f, cas = fake
    datas = [b"one", b"two", b"three" * 2000]
    cas.upload(_blobs(*datas))
    got = cas.read_many(Digest.of_bytes(d) for d in datas)
    assert [got[Digest.of_bytes(d)] for d in datas] == datas
    f.corrupt = True
    with pytest.raises(DigestMismatchError):
        cas.read(Digest.of_bytes(b"two"))
    with pytest.raises(DigestMismatchError):
        cas.read(Digest.of_bytes(datas[2]))


def test_a_per_blob_failure_is_an_error_not_silence(fake: tuple[FakeCas, Cas]) -> None:
    f, cas = fake
    f.fail_update = True
    with pytest.raises(RemoteError, match="INVALID_ARGUMENT"):
        cas.upload(_blobs(b"x"))


def test_a_large_file_streams_in_chunks_and_a_file_that_changed_is_never_committed(
    fake: tuple[FakeCas, Cas], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's output goes up chunk by chunk from its file (its memory holds a chunk, not the output); the
    chunk that finishes the write is sent only when the bytes hashed on the way match the digest."""
    f, cas = fake
    monkeypatch.setattr(cas_mod, "STREAM_CHUNK", 4096)
    out = tmp_path / "big.o"
    out.write_bytes(bytes(range(256)) * 100)  # 25,600 bytes: 7 chunks
    d = Digest.of_file(out)
    assert cas.upload({d: BlobSource(path=out)}) == d.size
    assert f.blobs[d.hash] == out.read_bytes() and len(f.stream_writes) == 1
    changed = tmp_path / "changed.o"
    changed.write_bytes(b"a" * 20_000)
    stale = Digest.of_file(changed)
    changed.write_bytes(b"b" * 20_000)
    with pytest.raises(RemoteError):
        cas.upload({stale: BlobSource(path=changed)})
    assert stale.hash not in f.blobs  # the stream was abandoned before finish_write


def test_a_streamed_blob_has_a_deadline_that_grows_with_its_size(fake: tuple[FakeCas, Cas]) -> None:
    """30 s (here the fixture's 5) for any call, plus a second per MiB for a stream: a loaded server that compresses
    a compiler's 129 MB library for each reader outlived the fixed deadline, and each retry started over."""
    f, cas = fake
    big = bytes(range(256)) * (3 * 4096)  # 3 MiB: streamed
    cas.upload(_blobs(big))
    assert cas.read(Digest.of_bytes(big)) == big
    write, read = f.stream_deadlines
    assert 7.0 < write < 8.1 and 7.0 < read < 8.1, f.stream_deadlines  # gRPC rounds deadlines up


def test_a_stream_longer_than_its_blob_is_read_no_further(fake: tuple[FakeCas, Cas]) -> None:
    """A server that keeps sending after the blob's bytes (the audit's sent 1 GiB for 8 MiB, and the client's memory
    grew by 2 GiB before the digest check) is cut off at the first byte past the blob's size."""
    f, cas = fake
    big = bytes(range(256)) * (3 * 4096)  # 3 MiB: streamed
    cas.upload(_blobs(big))
    f.flood = 200
    with pytest.raises(DigestMismatchError, match="more than its"):
        cas.read(Digest.of_bytes(big))
    assert f.flood_sent < 20, f.flood_sent  # the call was cancelled, not drained


@pytest.mark.parametrize("cached", [True, False], ids=["into-the-file-cache", "without-a-cache"])
def test_an_input_larger_than_a_fetch_group_is_streamed_to_disk(fake: tuple[FakeCas, Cas], tmp_path: Path,
                                                                  cached: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A root worker held a blob larger than a fetch group whole in memory (a client's input may be as large as
    --max-input-bytes, 32 GiB); it is streamed to disk now, at every path that names it."""
    import tracemalloc

    from goma_ext.worker import exec_root
    from goma_ext.worker.filecache import FileCache
    from tests import input_trees

    f, cas = fake
    monkeypatch.setattr(exec_root, "FETCH_GROUP_BYTES", 4 << 20)  # (64 MiB: the same code, slower)
    big = bytes(range(256)) * (12 << 12)  # 12 MiB: three fetch groups
    blobs: dict[Digest, bytes] = {}
    root = input_trees.build({"a": ("file", big, False), "d": {"b": ("file", big, True), "c": ("file", big, False)}},
                             lambda d, data: blobs.__setitem__(d, data))
    cas.upload({d: BlobSource(data=data) for d, data in blobs.items()})
    del blobs
    cache = FileCache(tmp_path / "cache") if cached else None
    tracemalloc.start()
    try:
        placed = exec_root.materialise(cas, root, tmp_path / "s", cache)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    for name in ("a", "d/b", "d/c"):
        assert (tmp_path / "s" / name).read_bytes() == big, name
    assert os.access(tmp_path / "s" / "d" / "b", os.X_OK) and not os.access(tmp_path / "s" / "a", os.X_OK)
    assert placed.fetched == 1 and placed.fetched_bytes == len(big)
    assert len(big) <= cas.bytes_downloaded < len(big) + 4096  # the blob once (and the Directory blobs)
    assert peak < len(big) // 2, peak  # a few chunks of 1 MiB (about 4 MiB), never the whole blob (24 MiB)
