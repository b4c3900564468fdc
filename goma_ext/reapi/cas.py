"""CAS transfers: FindMissingBlobs in bounded chunks, batched small blobs, ByteStream for large ones, verified reads."""

from __future__ import annotations

import functools
import hashlib
import io
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, BinaryIO

import grpc

from goma_ext.reapi import retry
from goma_ext.reapi.capabilities import ServerLimits
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import DigestMismatchError, RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import bs_grpc, bs_pb2, code_pb2, re_grpc, re_pb2

FIND_MISSING_CHUNK = 1000
BATCH_OVERHEAD = 256  # per-blob framing allowance inside a batch request
STREAM_CHUNK = 1 << 20


def _status_error(what: str, digest: Digest, status: object) -> RemoteError:
    code = getattr(status, "code", code_pb2.UNKNOWN)
    name = code_pb2.Code.Name(code) if code in code_pb2.Code.values() else str(code)
    temporary = code in (code_pb2.UNAVAILABLE, code_pb2.ABORTED, code_pb2.RESOURCE_EXHAUSTED, code_pb2.INTERNAL)
    return RemoteError(f"{what} {digest}: {name}: {getattr(status, 'message', '')}", temporary=temporary, code=name)


def verify(digest: Digest, data: bytes) -> bytes:
    """Return data if it hashes to digest, else raise DigestMismatchError."""
    actual = Digest.of_bytes(data)
    if actual != digest:
        raise DigestMismatchError(f"blob {digest} arrived with content {actual}")
    return data


class Cas:
    """A CAS client for one instance; remembers what it already uploaded (per object, never globally)."""

    def __init__(
        self,
        channel: grpc.Channel,
        instance: str,
        metadata: tuple[tuple[str, str], ...],
        limits: ServerLimits,
        policy: retry.RetryPolicy,
    ) -> None:
        self._cas = re_grpc.ContentAddressableStorageStub(channel)
        self._bs = bs_grpc.ByteStreamStub(channel)
        self._instance = instance
        self._metadata = metadata
        self._limits = limits
        self._policy = policy
        self._present: set[Digest] = set()
        self.bytes_uploaded = 0
        self.bytes_downloaded = 0
        self.calls: Counter[str] = Counter()  # RPCs made, by method (the proxy's stats)
        self._count_lock = threading.Lock()

    def _count(self, call: str = "", uploaded: int = 0, downloaded: int = 0) -> None:
        """The status figures, kept by every thread that uses this client (the proxy's actions, its uploader)."""
        with self._count_lock:
            if call:
                self.calls[call] += 1
            self.bytes_uploaded += uploaded
            self.bytes_downloaded += downloaded

    def rpc_counts(self) -> dict[str, int]:
        """RPCs made so far, by method."""
        with self._count_lock:
            return dict(self.calls)

    def _resource(self, tail: str) -> str:
        return f"{self._instance}/{tail}" if self._instance else tail

    def _fits_batch(self, digest: Digest) -> bool:
        return digest.size + BATCH_OVERHEAD <= self._limits.max_batch_bytes

    def _rpc(self, method: Callable[..., Any], request: object, timeout: float) -> Any:
        """One unary CAS call with this client's metadata (retry.call supplies the timeout)."""
        return method(request, timeout=timeout, metadata=self._metadata)

    def _batches(self, digests: Iterable[Digest]) -> Iterator[list[Digest]]:
        batch: list[Digest] = []
        total = 0
        for d in digests:
            cost = d.size + BATCH_OVERHEAD
            if batch and total + cost > self._limits.max_batch_bytes:
                yield batch
                batch, total = [], 0
            batch.append(d)
            total += cost
        if batch:
            yield batch

    def find_missing(self, digests: Iterable[Digest]) -> set[Digest]:
        """The subset of digests the server lacks, asked in chunks of FIND_MISSING_CHUNK."""
        wanted = sorted(set(digests))
        missing: set[Digest] = set()
        for i in range(0, len(wanted), FIND_MISSING_CHUNK):
            chunk = wanted[i : i + FIND_MISSING_CHUNK]
            req = re_pb2.FindMissingBlobsRequest(
                instance_name=self._instance, blob_digests=[d.to_proto() for d in chunk]
            )
            find = functools.partial(self._rpc, self._cas.FindMissingBlobs, req)
            resp = retry.call("FindMissingBlobs", find, self._policy)
            self._count("FindMissingBlobs")
            asked = set(chunk)
            for d in resp.missing_blob_digests:
                digest = Digest.from_proto(d)
                if digest in asked:  # ignore digests we never asked about
                    missing.add(digest)
        return missing

    def upload(self, blobs: Mapping[Digest, BlobSource]) -> int:
        """Upload each blob the server lacks, at most once per Cas object; return the bytes sent."""
        return sum(d.size for d in self.upload_missing(blobs))

    def upload_missing(self, blobs: Mapping[Digest, BlobSource]) -> set[Digest]:
        """Upload each blob the server lacks (asking only about those not known present); return those sent."""
        todo = {d: s for d, s in blobs.items() if d not in self._present}
        if not todo:
            return set()
        missing = self.find_missing(todo)
        self._present.update(d for d in todo if d not in missing)
        small = sorted(d for d in missing if self._fits_batch(d))
        for batch in self._batches(small):
            self._batch_update({d: todo[d].read() for d in batch})
            self._count("BatchUpdateBlobs")
        for d in sorted(d for d in missing if not self._fits_batch(d)):
            self._write_stream(d, todo[d])
            self._count("ByteStream.Write")
        self._present.update(missing)
        self._count(uploaded=sum(d.size for d in missing))
        return missing

    def forget_present(self) -> None:
        """Drop what this client believes the CAS holds (after the server reported missing inputs)."""
        self._present.clear()

    @property
    def known_present(self) -> int:
        return len(self._present)

    def upload_bytes(self, items: Iterable[bytes]) -> list[Digest]:
        """Upload in-memory blobs; return their digests in order."""
        blobs = {Digest.of_bytes(b): BlobSource(data=b) for b in items}
        self.upload(blobs)
        return list(blobs)

    def _batch_update(self, data: Mapping[Digest, bytes]) -> None:
        for d, b in data.items():
            verify(d, b)
        req = re_pb2.BatchUpdateBlobsRequest(
            instance_name=self._instance,
            requests=[re_pb2.BatchUpdateBlobsRequest.Request(digest=d.to_proto(), data=b) for d, b in data.items()],
        )
        resp = retry.call(
            "BatchUpdateBlobs",
            lambda t: self._cas.BatchUpdateBlobs(req, timeout=t, metadata=self._metadata),
            self._policy,
        )
        seen: set[Digest] = set()
        for r in resp.responses:
            digest = Digest.from_proto(r.digest)
            if r.status.code != code_pb2.OK:
                raise _status_error("BatchUpdateBlobs", digest, r.status)
            seen.add(digest)
        if lost := set(data) - seen:
            raise RemoteError(f"BatchUpdateBlobs: no status for {len(lost)} blob(s), e.g. {min(lost)}", temporary=True)

    def _write_stream(self, digest: Digest, source: BlobSource) -> None:
        """ByteStream.Write of one blob. A file source is read chunk by chunk (a worker's memory holds one chunk
        of an output, not the output) and hashed on the way; the last chunk (finish_write) is sent only when the
        bytes match the digest, else the stream is abandoned with DigestMismatchError."""
        if source.data is not None:
            verify(digest, source.data)

        def chunks() -> Iterator[bytes]:
            if source.data is not None:
                data = source.data
                yield from (data[off : off + STREAM_CHUNK] for off in range(0, len(data), STREAM_CHUNK))
                return
            if source.path is None:
                raise RemoteError(f"ByteStream.Write {digest}: a blob source with neither data nor path",
                                  temporary=False)
            h = hashlib.sha256()
            size = 0
            with open(source.path, "rb") as f:
                while chunk := f.read(STREAM_CHUNK):
                    h.update(chunk)
                    size += len(chunk)
                    if size > digest.size:
                        break
                    yield chunk
            if Digest(h.hexdigest(), size) != digest:
                raise DigestMismatchError(f"blob {digest}: {source.path} changed while it was uploaded")

        def requests(name: str) -> Iterator[bs_pb2.WriteRequest]:
            off = 0
            pending: bytes | None = None
            for chunk in chunks():  # one chunk held back: the last one carries finish_write
                if pending is not None:
                    yield bs_pb2.WriteRequest(resource_name=name if off == 0 else "", write_offset=off, data=pending)
                    off += len(pending)
                pending = chunk
            yield bs_pb2.WriteRequest(resource_name=name if off == 0 else "", write_offset=off, data=pending or b"",
                                      finish_write=True)

        def attempt(timeout: float) -> bs_pb2.WriteResponse:
            name = self._resource(f"uploads/{uuid.uuid4()}/blobs/{digest.hash}/{digest.size}")
            return self._bs.Write(requests(name), timeout=timeout, metadata=self._metadata)

        resp = retry.call("ByteStream.Write", attempt, self._policy,
                          timeout_s=self._policy.stream_timeout(digest.size))
        if resp.committed_size not in (digest.size, -1):
            raise RemoteError(
                f"ByteStream.Write {digest}: server committed {resp.committed_size} bytes", temporary=True
            )

    def read_many(self, digests: Iterable[Digest]) -> dict[Digest, bytes]:
        """Fetch and verify blobs: batched when small, streamed when large."""
        wanted = sorted(set(digests))
        out: dict[Digest, bytes] = {d: b"" for d in wanted if d.size == 0}
        small = [d for d in wanted if d.size and self._fits_batch(d)]
        for batch in self._batches(small):
            req = re_pb2.BatchReadBlobsRequest(instance_name=self._instance, digests=[d.to_proto() for d in batch])
            read = functools.partial(self._rpc, self._cas.BatchReadBlobs, req)
            resp = retry.call("BatchReadBlobs", read, self._policy)
            self._count("BatchReadBlobs")
            for r in resp.responses:
                digest = Digest.from_proto(r.digest)
                if digest not in batch:
                    continue
                if r.status.code != code_pb2.OK:
                    raise _status_error("BatchReadBlobs", digest, r.status)
                out[digest] = verify(digest, r.data)
            if lost := set(batch) - set(out):
                raise RemoteError(
                    f"BatchReadBlobs: no answer for {len(lost)} blob(s), e.g. {min(lost)}", temporary=True
                )
        for d in wanted:
            if d not in out:
                out[d] = self._read_stream(d)
                self._count("ByteStream.Read")
        self._count(downloaded=sum(d.size for d in wanted))
        return out

    def read(self, digest: Digest) -> bytes:
        return self.read_many([digest])[digest]

    def read_into(self, digest: Digest, f: BinaryIO) -> None:
        """Fetch DIGEST's blob into F (from its start, truncated first); a large one streamed and hashed as it
        comes, never whole in memory. DigestMismatchError unless it is exactly the blob."""
        if digest.size == 0 or self._fits_batch(digest):
            data = self.read(digest)
            f.seek(0)
            f.truncate()
            f.write(data)
        else:
            self._stream_into(digest, f)
            self._count(downloaded=digest.size)
        f.flush()

    def _read_stream(self, digest: Digest) -> bytes:
        buf = io.BytesIO()
        self._stream_into(digest, buf)
        return buf.getvalue()

    def _stream_into(self, digest: Digest, f: BinaryIO) -> None:
        """ByteStream.Read of DIGEST into F from its start, hashed as it comes and read no further than the blob's
        size (a server that sends more is cut off: the audit's sent 1 GiB for 8 MiB)."""
        req = bs_pb2.ReadRequest(resource_name=self._resource(f"blobs/{digest.hash}/{digest.size}"),
                                 read_limit=digest.size)

        def attempt(timeout: float) -> None:
            f.seek(0)
            f.truncate()
            h, got = hashlib.sha256(), 0
            call = self._bs.Read(req, timeout=timeout, metadata=self._metadata)
            for r in call:
                got += len(r.data)
                if got > digest.size:
                    call.cancel()
                    raise DigestMismatchError(f"blob {digest} arrived with more than its {digest.size} bytes")
                h.update(r.data)
                f.write(r.data)
            actual = Digest(h.hexdigest(), got)
            if actual != digest:
                raise DigestMismatchError(f"blob {digest} arrived with content {actual}")

        retry.call("ByteStream.Read", attempt, self._policy, timeout_s=self._policy.stream_timeout(digest.size))
