"""The Bots API session loop: create a session, long-poll UpdateBotSession, run ACTIVE leases, report results."""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import grpc

from goma_ext.reapi import capabilities, retry
from goma_ext.reapi.cas import Cas
from goma_ext.reapi.channel import open_channel
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.proto import bots_pb2, bots_pb2_grpc, code_pb2, re_pb2, status_pb2, worker_pb2
from goma_ext.remote.config import RemoteConfig
from goma_ext.worker.filecache import FileCache
from goma_ext.worker.lease import LeaseOutcome, execute_lease
from goma_ext.worker.policy import NO_OFFER, Allowlist, Offer
from goma_ext.worker.sandbox import Isolation

LOG = logging.getLogger("goma_ext.worker")
LONG_POLL_S = 20.0
# CreateBotSession's deadline. BuildGrid long-polls it for leases like UpdateBotSession, for 80 % of the deadline,
# unless that is under its NETWORK_TIMEOUT (3 s): with 3.5 s it answers at once, so a worker registers (and `cluster
# start` returns, and workers are back after a server restart) 16 s sooner; leases come with the first update.
CREATE_TIMEOUT_S = 3.5
BUSY_POLL_S = 5.0
SESSION_FILE = "session"  # written in the work dir once the bot has a session (cluster start waits for it)


@dataclass(frozen=True)
class WorkerSettings:
    """One worker process: where to connect, who it is, what it may run, how, where it works."""

    remote: RemoteConfig
    bot_id: str
    allow: Allowlist
    work_dir: Path
    isolation: Isolation
    sandbox_dir: Path  # per-action directories; the runner uid must be able to search every parent
    file_cache: FileCache | None = None  # input files by digest, shared by the worker processes of one work dir
    offer: Offer = NO_OFFER  # --platform KEY=VALUE: advertised, and checked against every action's platform


def _session(s: WorkerSettings) -> bots_pb2.BotSession:
    device = worker_pb2.Device(
        handle=s.bot_id, properties=[worker_pb2.Device.Property(key=k, value=v) for k, v in s.allow.properties(s.offer)]
    )
    worker = worker_pb2.Worker(devices=[device], configs=[worker_pb2.Worker.Config(key="capacity", value="1")])
    return bots_pb2.BotSession(bot_id=s.bot_id, status=bots_pb2.BotStatus.OK, worker=worker)


def _payload(lease: bots_pb2.Lease) -> re_pb2.Action | Digest | None:
    action = re_pb2.Action()
    if lease.payload.Unpack(action):
        return action
    digest = re_pb2.Digest()
    if lease.payload.Unpack(digest):
        return Digest.from_proto(digest)
    return None


class _Job:
    """One lease running on a background thread."""

    def __init__(self, cas: Cas, lease: bots_pb2.Lease, s: WorkerSettings) -> None:
        self.lease_id = lease.id
        self.done = threading.Event()
        self.cancelled = threading.Event()  # set when the lease is cancelled or gone: the action is killed
        self.outcome: LeaseOutcome | None = None
        self.started = time.monotonic()
        payload = _payload(lease)
        self._thread = threading.Thread(target=self._main, args=(cas, payload, s), daemon=True)
        self._thread.start()

    def _main(self, cas: Cas, payload: re_pb2.Action | Digest | None, s: WorkerSettings) -> None:
        if payload is None:
            self.outcome = LeaseOutcome(
                status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message="unknown lease payload"), None
            )
        else:
            try:
                self.outcome = execute_lease(
                    cas, payload, s.allow, s.sandbox_dir, s.isolation, self.cancelled, file_cache=s.file_cache,
                    offer=s.offer,
                )
            except BaseException as e:  # execute_lease turns every failure it knows into a status; not this one
                LOG.exception("lease %s: the worker failed", self.lease_id)
                self.outcome = LeaseOutcome(
                    status_pb2.Status(code=code_pb2.INTERNAL, message=f"worker failure: {type(e).__name__}: {e}"),
                    None)
                self.done.set()  # the lease completes: a bot never waits on a job that died
                if not isinstance(e, Exception):
                    raise
        LOG.info(
            "lease %s: %s in %.0f ms",
            self.lease_id,
            code_pb2.Code.Name(cast("code_pb2.Code.ValueType", self.outcome.status.code)),
            (time.monotonic() - self.started) * 1000,
        )
        self.done.set()


class BotWorker:
    """A single-lease Bots API worker; `run()` loops until `stop()`."""

    def __init__(self, s: WorkerSettings) -> None:
        self.s = s
        self._stop = threading.Event()
        self._rng = random.Random()

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._serve()
                failures = 0
            except (grpc.RpcError, RemoteError) as e:
                failures += 1
                delay = min(5.0, 0.1 * 2 ** min(failures, 6)) * self._rng.uniform(0.5, 1.0)
                why = f"{e.code().name}: {e.details()}" if isinstance(e, grpc.RpcError) else str(e)
                LOG.warning("bot %s: %s; reconnecting in %.1f s", self.s.bot_id, why, delay)
                self._stop.wait(delay)

    def _serve(self) -> None:
        cfg = self.s.remote
        metadata = cfg.metadata()
        policy = retry.RetryPolicy(cfg.max_attempts, cfg.backoff_base_s, cfg.backoff_cap_s, cfg.rpc_timeout_s)
        with open_channel(cfg) as channel:
            limits = capabilities.fetch(channel, cfg.instance, metadata, policy)
            cas = Cas(channel, cfg.instance, metadata, limits, policy)
            stub = bots_pb2_grpc.BotsStub(channel)
            session = stub.CreateBotSession(
                bots_pb2.CreateBotSessionRequest(parent=cfg.instance, bot_session=_session(self.s)),
                timeout=CREATE_TIMEOUT_S,
                metadata=metadata,
            )
            LOG.info("bot %s: session %s", self.s.bot_id, session.name)
            (self.s.work_dir / SESSION_FILE).write_text(session.name + "\n")
            jobs: dict[str, _Job] = {}
            while not self._stop.is_set():
                session = self._sync(stub, cas, session, jobs, metadata)

    def _sync(
        self,
        stub: bots_pb2_grpc.BotsStub,
        cas: Cas,
        session: bots_pb2.BotSession,
        jobs: dict[str, _Job],
        metadata: tuple[tuple[str, str], ...],
    ) -> bots_pb2.BotSession:
        for lease in session.leases:
            if lease.state == bots_pb2.LeaseState.CANCELLED and lease.id in jobs:
                jobs[lease.id].cancelled.set()
            if lease.state == bots_pb2.LeaseState.ACTIVE and lease.id not in jobs:
                LOG.info("bot %s: lease %s", self.s.bot_id, lease.id)
                jobs[lease.id] = _Job(cas, lease, self.s)
        running = [j for j in jobs.values() if not j.done.is_set()]
        if running:
            running[0].done.wait(BUSY_POLL_S)
        for lease in session.leases:
            job = jobs.get(lease.id)
            if job is not None and job.done.is_set() and job.outcome is not None:
                lease.state = bots_pb2.LeaseState.COMPLETED
                lease.status.CopyFrom(job.outcome.status)
                if job.outcome.result is not None:
                    lease.result.Pack(job.outcome.result)
        live = {lease.id for lease in session.leases}
        for lease_id in [k for k, j in jobs.items() if j.done.is_set() or k not in live]:
            if lease_id not in live:
                jobs.pop(lease_id).cancelled.set()  # the server dropped the lease: stop its action
        busy = any(not j.done.is_set() for j in jobs.values())
        new = stub.UpdateBotSession(
            bots_pb2.UpdateBotSessionRequest(name=session.name, bot_session=session),
            timeout=BUSY_POLL_S + 5 if busy else LONG_POLL_S,
            metadata=metadata,
        )
        for lease in session.leases:
            if lease.state == bots_pb2.LeaseState.COMPLETED:
                jobs.pop(lease.id, None)
        return new
