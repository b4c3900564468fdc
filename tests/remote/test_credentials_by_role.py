"""[harden] Credentials by role, attacked on the real cluster (BuildGrid 0.4.4 with the ACL `cluster start` renders).
Each attack is one RPC made as an attacker holding one credential would make it: the client token opening a bot
session or answering a worker's session (taking other users' leases), the client or worker token writing the action
cache (forged results served to everyone), the worker token running actions, no token, and tokens of every role
signed with another key. BuildGrid refuses all of them with UNAUTHENTICATED (its one authorization error), and a
refused cache write leaves the cache without the forged result. The same tokens' own RPCs are accepted, so the
refusals come from the role, not from a broken token; the cache writer's UpdateActionResult is accepted and served.
Run with -s to see one line per attack."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import grpc
import pytest

from goma_ext.cluster import secretfiles, tokens
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.proto import bots_pb2, bots_pb2_grpc, re_grpc, re_pb2
from goma_ext.worker.bots import SESSION_FILE
from tests.remote.conftest import INSTANCE, Cluster

TIMEOUT_S = 10.0
Metadata = tuple[tuple[str, str], ...]


class Key(Enum):
    CLUSTER = "the cluster's key"
    OTHER = "another key"


@dataclass(frozen=True)
class Credential:
    """What the attacker sends: ROLE's token signed with KEY, or no token at all (role None)."""

    role: tokens.Role | None
    key: Key = Key.CLUSTER

    @property
    def label(self) -> str:
        if self.role is None:
            return "no token"
        name = secretfiles.token_name(self.role).removesuffix(".token")
        return f"{name} token" + (f" signed by {self.key.value}" if self.key is Key.OTHER else "")

    def metadata(self, cluster: Cluster) -> Metadata:
        if self.role is None:
            return ()
        if self.key is Key.OTHER:
            token = tokens.mint(secretfiles.new_secret(), self.role)  # right shape and subject, wrong signature
        else:
            path = cluster.st.token_file(self.role)
            assert path is not None, "the test cluster has JWT authentication"
            token = secretfiles.read_private(path)
        return (("authorization", f"Bearer {token}"),)


CLIENT = Credential(tokens.Role.CLIENT)
WORKER = Credential(tokens.Role.WORKER)
CACHE_WRITER = Credential(tokens.Role.CACHE_WRITER)
NO_TOKEN = Credential(None)


@dataclass(frozen=True)
class Target:
    """What the attacks aim at: a running worker's bot session, and an action digest with a forged result (its
    object in the CAS, so that only the refusal can keep it from being served)."""

    session: str
    action: re_pb2.Digest
    forged: re_pb2.ActionResult


def _code(call: Callable[[], object]) -> str:
    try:
        call()
    except grpc.RpcError as e:
        return str(e.code().name)
    return "OK"


def _create_bot_session(ch: grpc.Channel, md: Metadata, t: Target) -> object:
    session = bots_pb2.BotSession(bot_id=f"attacker-{os.getpid()}", status=bots_pb2.BotStatus.OK)
    request = bots_pb2.CreateBotSessionRequest(parent=INSTANCE, bot_session=session)
    return bots_pb2_grpc.BotsStub(ch).CreateBotSession(request, timeout=TIMEOUT_S, metadata=md)


def _update_bot_session(ch: grpc.Channel, md: Metadata, t: Target) -> object:
    """Answer a running worker's session: what would take its leases and complete them with forged results."""
    session = bots_pb2.BotSession(name=t.session, bot_id=f"attacker-{os.getpid()}", status=bots_pb2.BotStatus.OK)
    request = bots_pb2.UpdateBotSessionRequest(name=t.session, bot_session=session)
    return bots_pb2_grpc.BotsStub(ch).UpdateBotSession(request, timeout=TIMEOUT_S, metadata=md)


def _update_action_result(ch: grpc.Channel, md: Metadata, t: Target) -> object:
    request = re_pb2.UpdateActionResultRequest(instance_name=INSTANCE, action_digest=t.action, action_result=t.forged)
    return re_grpc.ActionCacheStub(ch).UpdateActionResult(request, timeout=TIMEOUT_S, metadata=md)


def _execute(ch: grpc.Channel, md: Metadata, t: Target) -> object:
    """Execute an action (one not in the CAS: once authorized, BuildGrid answers FAILED_PRECONDITION)."""
    request = re_pb2.ExecuteRequest(instance_name=INSTANCE, action_digest=t.action, skip_cache_lookup=True)
    return next(iter(re_grpc.ExecutionStub(ch).Execute(request, timeout=TIMEOUT_S, metadata=md)))


def _get_action_result(ch: grpc.Channel, md: Metadata, t: Target) -> re_pb2.ActionResult:
    request = re_pb2.GetActionResultRequest(instance_name=INSTANCE, action_digest=t.action)
    result: re_pb2.ActionResult = re_grpc.ActionCacheStub(ch).GetActionResult(request, timeout=TIMEOUT_S, metadata=md)
    return result


def _get_capabilities(ch: grpc.Channel, md: Metadata, t: Target) -> object:
    request = re_pb2.GetCapabilitiesRequest(instance_name=INSTANCE)
    return re_grpc.CapabilitiesStub(ch).GetCapabilities(request, timeout=TIMEOUT_S, metadata=md)


def _find_missing_blobs(ch: grpc.Channel, md: Metadata, t: Target) -> object:
    request = re_pb2.FindMissingBlobsRequest(instance_name=INSTANCE, blob_digests=[t.action])
    return re_grpc.ContentAddressableStorageStub(ch).FindMissingBlobs(request, timeout=TIMEOUT_S, metadata=md)


Rpc = Callable[[grpc.Channel, Metadata, Target], object]


@dataclass(frozen=True)
class Attack:
    credential: Credential
    rpc: Rpc

    @property
    def label(self) -> str:
        return f"{self.credential.label} {self.rpc.__name__.removeprefix('_').title().replace('_', '')}"


ATTACKS = [
    Attack(CLIENT, _create_bot_session),
    Attack(CLIENT, _update_bot_session),
    Attack(CLIENT, _update_action_result),
    Attack(WORKER, _execute),
    Attack(WORKER, _update_action_result),
    Attack(NO_TOKEN, _create_bot_session),
    Attack(NO_TOKEN, _update_action_result),
    Attack(Credential(tokens.Role.WORKER, Key.OTHER), _create_bot_session),
    Attack(Credential(tokens.Role.CLIENT, Key.OTHER), _execute),
    Attack(Credential(tokens.Role.CACHE_WRITER, Key.OTHER), _update_action_result),
]


@pytest.fixture(scope="module")
def channel(cluster: Cluster) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(cluster.endpoint.removeprefix("grpc://")) as ch:  # localhost: not exempt either
        yield ch


def _session_of_a_running_worker(cluster: Cluster) -> str:
    sessions = sorted(Path(cluster.st.state, "workers").glob(f"*/{SESSION_FILE}"))
    assert sessions, "the cluster's workers have registered"
    return sessions[0].read_text().strip()


def _target(cluster: Cluster, channel: grpc.Channel, what: str) -> Target:
    """A fresh action digest (nothing cached for it) and a forged result whose object is in the CAS: the client
    token may write blobs, which need no trust (a result names each by digest)."""
    forged_object = f"forged object for {what}".encode()
    blob = Digest.of_bytes(forged_object).to_proto()
    upload = re_pb2.BatchUpdateBlobsRequest(instance_name=INSTANCE, requests=[
        re_pb2.BatchUpdateBlobsRequest.Request(digest=blob, data=forged_object)])
    stored = re_grpc.ContentAddressableStorageStub(channel).BatchUpdateBlobs(
        upload, timeout=TIMEOUT_S, metadata=CLIENT.metadata(cluster))
    assert [r.status.code for r in stored.responses] == [0]
    action = Digest.of_bytes(f"the victim's action, {what}, {uuid.uuid4()}".encode()).to_proto()
    forged = re_pb2.ActionResult(exit_code=0, stdout_raw=b"forged",
                                 output_files=[re_pb2.OutputFile(path="obj/victim.o", digest=blob)])
    return Target(_session_of_a_running_worker(cluster), action, forged)


def _cached(cluster: Cluster, channel: grpc.Channel, t: Target) -> re_pb2.ActionResult | None:
    """What the action cache serves a client for T's action (None: nothing)."""
    try:
        return _get_action_result(channel, CLIENT.metadata(cluster), t)
    except grpc.RpcError as e:
        if e.code() is grpc.StatusCode.NOT_FOUND:
            return None
        raise


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.label.replace(" ", "-"))
def test_an_rpc_outside_the_credentials_role_is_refused(cluster: Cluster, channel: grpc.Channel,
                                                       attack: Attack) -> None:
    t = _target(cluster, channel, attack.label)
    code = _code(lambda: attack.rpc(channel, attack.credential.metadata(cluster), t))
    print(f"attack: {attack.label} -> {code}")
    assert code == "UNAUTHENTICATED", attack.label
    if attack.rpc is _update_action_result:
        assert _cached(cluster, channel, t) is None, f"{attack.label}: the forged result is served"


@pytest.mark.parametrize(("credential", "rpc", "codes"), [
    (CLIENT, _get_capabilities, {"OK"}),
    (CLIENT, _execute, {"FAILED_PRECONDITION"}),  # authorized; the action is not in the CAS
    (WORKER, _get_capabilities, {"OK"}),
    (WORKER, _find_missing_blobs, {"OK"}),
    (CACHE_WRITER, _get_action_result, {"NOT_FOUND"}),  # authorized; nothing cached for a fresh digest
], ids=lambda v: v.label.replace(" ", "-") if isinstance(v, Credential) else getattr(v, "__name__", None))
def test_the_same_tokens_are_accepted_within_their_role(cluster: Cluster, channel: grpc.Channel,
                                                        credential: Credential, rpc: Rpc, codes: set[str]) -> None:
    t = _target(cluster, channel, f"{credential.label} control")
    code = _code(lambda: rpc(channel, credential.metadata(cluster), t))
    print(f"control: {Attack(credential, rpc).label} -> {code}")
    assert code in codes


def test_the_cache_writer_token_writes_the_action_cache_and_a_client_cannot_overwrite_it(
    cluster: Cluster, channel: grpc.Channel
) -> None:
    t = _target(cluster, channel, "the cache writer's upload")
    code = _code(lambda: _update_action_result(channel, CACHE_WRITER.metadata(cluster), t))
    print(f"trusted: cache-writer token UpdateActionResult -> {code}")
    assert code == "OK" and _cached(cluster, channel, t) == t.forged  # the same kind of result the attacks sent
    overwrite = Target(t.session, t.action, re_pb2.ActionResult(exit_code=0, stdout_raw=b"overwritten"))
    code = _code(lambda: _update_action_result(channel, CLIENT.metadata(cluster), overwrite))
    print(f"attack: client token UpdateActionResult over a cached result -> {code}")
    assert code == "UNAUTHENTICATED" and _cached(cluster, channel, t) == t.forged
