"""State shared by every action the proxy runs: the executor, hashed files, CAS uploads, in-flight actions."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Generic, TypeVar

from goma_ext.reapi.cas import Cas
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.action_inputs import ActionFiles, action_files
from goma_ext.remote.client import (
    PreparedAction,
    RemoteExecutor,
    fetch_outputs,
    kept_in_cas,
    prepare_action,
    toolchain_for,
)
from goma_ext.remote.config import DEFAULT_BASE_SYSTEM, RemoteConfig
from goma_ext.remote.identity import CompilerIdentity
from goma_ext.remote.toolchain import ToolchainCache
from thinlto_base.fsutil import changed_lately

T = TypeVar("T")
MEMO_LIMIT = 500_000  # hashed files remembered; the memo starts over beyond this
DOWN_HOLD_S = 30.0  # after UNAVAILABLE, answer at once for this long instead of retrying per action


class DigestMemo:
    """File digests keyed by the file's stat identity (path, size, mtime, ctime, inode): each file hashed once
    (unless it had just changed when it was hashed: fsutil.changed_lately). An upload still verifies the bytes it
    sends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, int, int, int, int], Digest] = {}
        self._hashing: Inflight[Digest] = Inflight()  # concurrent requests for one file hash it once
        self.hits = 0
        self.misses = 0

    def __call__(self, path: Path, st: os.stat_result) -> Digest:
        key = (str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        with self._lock:
            known = self._known.get(key)
            if known is not None:
                self.hits += 1
                return known
        digest, joined = self._hashing.once(key, lambda: self._hash(key, path, st))
        if joined:
            with self._lock:
                self.hits += 1
        return digest

    def _hash(self, key: tuple[str, int, int, int, int], path: Path, st: os.stat_result) -> Digest:
        racy = changed_lately(st)
        digest = Digest.of_file(path)
        with self._lock:
            self.misses += 1
            if len(self._known) >= MEMO_LIMIT:
                self._known.clear()
            if not racy:
                self._known[key] = digest
        return digest


class UploadBatcher:
    """Makes sure blobs are in the CAS, merging the requests of concurrent actions into shared RPCs.

    One thread flushes: whatever actions asked while the previous FindMissingBlobs/BatchUpdateBlobs round was
    in flight goes out together in the next one. Each caller learns the bytes its own blobs added."""

    def __init__(self, cas: Cas) -> None:
        self._cas = cas
        self._cond = threading.Condition()
        self._pending: list[tuple[Mapping[Digest, BlobSource], Future[int]]] = []
        self._thread: threading.Thread | None = None
        self.flushes = 0
        self.requests = 0

    def ensure(self, blobs: Mapping[Digest, BlobSource]) -> int:
        done: Future[int] = Future()
        with self._cond:
            self._pending.append((blobs, done))
            if self._thread is None:
                thread = threading.Thread(target=self._loop, name="cas-uploads", daemon=True)
                try:
                    thread.start()
                except BaseException:  # nothing would ever serve it; the next caller tries again
                    self._pending.pop()
                    raise
                self._thread = thread
            self._cond.notify()
        return done.result()

    def forget_present(self) -> None:
        with self._cond:
            self._cas.forget_present()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                batch, self._pending = self._pending, []
            merged: dict[Digest, BlobSource] = {}
            for blobs, _ in batch:
                merged.update(blobs)
            try:
                sent = self._cas.upload_missing(merged)
            except BaseException as e:  # handed to every waiting action
                for _, done in batch:
                    done.set_exception(e)
                continue
            self.flushes += 1
            self.requests += len(batch)
            claimed: set[Digest] = set()
            for blobs, done in batch:
                mine = {d for d in blobs if d in sent and d not in claimed}
                claimed |= mine
                done.set_result(sum(d.size for d in mine))


class Inflight(Generic[T]):
    """Runs identical concurrent work once: later callers with the same key wait for the first one's result."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[Hashable, Future[T]] = {}
        self.joined = 0

    def once(self, key: Hashable, work: Callable[[], T]) -> tuple[T, bool]:
        """(result, whether it came from another caller's run)."""
        with self._lock:
            running = self._running.get(key)
            if running is None:
                mine: Future[T] = Future()
                self._running[key] = mine
            else:
                self.joined += 1
        if running is not None:
            return running.result(), True
        try:
            value = work()
            mine.set_result(value)
            return value, False
        except BaseException as e:
            mine.set_exception(e)
            raise
        finally:
            with self._lock:
                del self._running[key]


@dataclass(frozen=True)
class ActionRequest:
    """A validated `run` request."""

    argv: tuple[str, ...]
    cwd: Path
    compiler: CompilerIdentity
    exec_root: Path
    cache_salt: str
    execute_timeout_s: float
    queue_timeout_s: float
    files: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (inputs, outputs) given by the caller
    toolchain: str = "inputs"
    base_system: tuple[str, ...] = DEFAULT_BASE_SYSTEM
    platform: tuple[tuple[str, str], ...] = ()
    download: str = "all"


@dataclass(frozen=True)
class ActionAnswer:
    exit_code: int
    stdout: bytes
    stderr: bytes
    mode: str  # stats.Mode value: remote, or cache_hit (also when an identical in-flight action answered)
    bytes_uploaded: int
    input_bytes: int
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Obtained:
    result: re_pb2.ActionResult
    cache_hit: bool
    uploaded: int
    phases: dict[str, float]


class SharedRemote:
    """Runs actions for every client of one proxy over one channel."""

    def __init__(self, cfg: RemoteConfig) -> None:
        self.cfg = cfg
        self.digests = DigestMemo()
        self.toolchains = ToolchainCache(digest_of=self.digests)  # kept for the proxy's life: hashed once
        self.inflight: Inflight[_Obtained] = Inflight()
        self.modes: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._executor: RemoteExecutor | None = None
        self._uploads: UploadBatcher | None = None
        self._down: tuple[float, str] | None = None
        self.outputs_already_here = 0  # outputs not downloaded: their destination held their bytes
        self.bytes_already_here = 0

    def connect(self) -> tuple[RemoteExecutor, UploadBatcher]:
        """The executor, created on first use (Capabilities asked once); fails fast while the server is down."""
        with self._lock:
            if self._executor is not None and self._uploads is not None:
                return self._executor, self._uploads
            if self._down is not None and time.monotonic() < self._down[0]:
                raise RemoteError(f"server marked unreachable in the last {DOWN_HOLD_S:.0f} s ({self._down[1]})",
                                  temporary=True, code="UNAVAILABLE")
            try:
                self._executor = RemoteExecutor(self.cfg)
            except RemoteError as e:
                self._down = (time.monotonic() + DOWN_HOLD_S, str(e)) if e.temporary else None
                raise
            self._down = None
            self._uploads = UploadBatcher(self._executor.cas)
            return self._executor, self._uploads

    def close(self) -> None:
        with self._lock:
            if self._executor is not None:
                self._executor.close()

    def _note_failure(self, e: RemoteError) -> None:
        if e.code == "UNAVAILABLE":
            with self._lock:
                self._down = (time.monotonic() + DOWN_HOLD_S, str(e))

    def run(self, req: ActionRequest) -> ActionAnswer:
        """Look the action up, else upload what the CAS lacks and execute it; write its outputs under req.cwd."""
        executor, uploads = self.connect()
        cfg = replace(self.cfg, exec_root=req.exec_root, cache_salt=req.cache_salt,
                      execute_timeout_s=req.execute_timeout_s, queue_timeout_s=req.queue_timeout_s,
                      toolchain=req.toolchain, base_system=req.base_system, platform=req.platform,
                      download=req.download)
        t = time.monotonic()
        files = ActionFiles(*req.files) if req.files is not None else action_files(req.argv, req.cwd)
        toolchain = toolchain_for(cfg, req.argv[0], req.compiler, self.toolchains)
        prepared = prepare_action(cfg, req.argv, req.cwd, files.inputs, files.outputs, req.compiler, self.digests,
                                  toolchain)
        prepare_s = time.monotonic() - t
        try:
            got, joined = self.inflight.once(prepared.built.action_digest,
                                             lambda: self._obtain(executor, uploads, prepared, cfg))
            t = time.monotonic()
            fetched = fetch_outputs(executor.cas, got.result, prepared, kept_in_cas(cfg))
        except RemoteError as e:
            self._note_failure(e)
            raise
        phases = {"prepare": prepare_s, **({"joined": sum(got.phases.values())} if joined else got.phases),
                  "download": time.monotonic() - t}
        mode = "cache_hit" if got.cache_hit or joined else "remote"
        with self._lock:
            self.modes["joined" if joined else mode] += 1
            self.outputs_already_here += fetched.kept_outputs
            self.bytes_already_here += fetched.kept_bytes
        return ActionAnswer(got.result.exit_code, fetched.stdout, fetched.stderr, mode, 0 if joined else got.uploaded,
                            prepared.tree.file_bytes, phases)

    def _obtain(self, executor: RemoteExecutor, uploads: UploadBatcher, prepared: PreparedAction,
                cfg: RemoteConfig) -> _Obtained:
        digest = prepared.built.action_digest
        t = time.monotonic()
        cached = executor.lookup(digest)
        phases = {"cache_lookup": time.monotonic() - t}
        if cached is not None:
            return _Obtained(cached, True, 0, phases)
        t = time.monotonic()
        uploaded = uploads.ensure(prepared.blobs())
        phases["upload"] = time.monotonic() - t
        t = time.monotonic()
        try:
            result = executor.execute(digest, cfg)
        except RemoteError as e:
            if e.code != "FAILED_PRECONDITION":
                raise
            # The server lacks an input we believed it had (evicted, or the server was reset): forget, retry once.
            uploads.forget_present()
            uploaded += uploads.ensure(prepared.blobs())
            result = executor.execute(digest, cfg)
        phases["execute"] = time.monotonic() - t
        return _Obtained(result, False, uploaded, phases)

    def counters(self) -> dict[str, int]:
        """Figures for `goma-ext proxy status`."""
        out = {f"actions_{k}": v for k, v in sorted(self.modes.items())}
        out.update(outputs_already_here=self.outputs_already_here, bytes_already_here=self.bytes_already_here,
                   files_hashed=self.digests.misses, file_hash_hits=self.digests.hits,
                   joined_in_flight=self.inflight.joined)
        with self._lock:
            executor, uploads = self._executor, self._uploads
        if executor is not None and uploads is not None:
            out.update({f"rpc_{k}": v for k, v in sorted(executor.cas.rpc_counts().items())})
            out.update(upload_rounds=uploads.flushes, upload_requests=uploads.requests,
                       cas_known_blobs=executor.cas.known_present, bytes_uploaded=executor.cas.bytes_uploaded,
                       bytes_downloaded=executor.cas.bytes_downloaded)
        return out
