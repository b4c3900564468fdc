"""[harden] Credentials by role: the ACL BuildGrid checks every RPC against (which RPCs the worker, client and cache
writer tokens may call), evaluated here as BuildGrid 0.4.4 evaluates it; the third token `cluster start` mints; and
that a worker host never acts as a client with its worker token."""

from __future__ import annotations

import re
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from goma_ext.cluster import acl, manager, secretfiles, tokens
from goma_ext.cluster.acl import Rpc
from goma_ext.reapi.proto import bots_pb2_grpc, bs_grpc, operations_pb2_grpc, re_grpc

INSTANCE = "gn-thinlto/test"
# The services `cluster start` enables (`!execution` brings Execution, Operations and Bots), as generated stubs.
SERVICERS = (re_grpc.ExecutionServicer, re_grpc.ActionCacheServicer, re_grpc.ContentAddressableStorageServicer,
             re_grpc.CapabilitiesServicer, bs_grpc.ByteStreamServicer, bots_pb2_grpc.BotsServicer,
             operations_pb2_grpc.OperationsServicer)
BLOBS = {"FindMissingBlobs", "BatchUpdateBlobs", "BatchReadBlobs", "GetTree", "Read", "Write", "QueryWriteStatus",
         "GetCapabilities"}
CLIENT = BLOBS | {"Execute", "WaitExecution", "GetOperation", "GetActionResult"}


def _allowed(doc: dict[str, Any], instance: str, subject: str, request: str) -> bool:
    """BuildGrid 0.4.4's decision (auth/manager.py `_check_acls`, auth/config.py `Acl.is_authorized`)."""
    config = doc.get(instance)
    if config is None:
        return False
    return any(re.match(a["subject"], subject) and request in a["requests"] for a in config["allow"])


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(acl.render(INSTANCE))
    return loaded


def test_the_rpc_table_is_every_method_of_the_enabled_services() -> None:
    methods = {name for s in SERVICERS for name in vars(s) if not name.startswith("_")}
    assert {r.value for r in Rpc} == methods


def test_each_role_is_granted_exactly_its_rpcs() -> None:
    def names(role: tokens.Role) -> set[str]:
        return {r.value for r in acl.grants(role)}

    assert names(tokens.Role.WORKER) == BLOBS | {"CreateBotSession", "UpdateBotSession", "PostBotEventTemp"}
    assert names(tokens.Role.CLIENT) == CLIENT
    assert names(tokens.Role.CACHE_WRITER) == CLIENT | {"UpdateActionResult"}


@pytest.mark.parametrize(("role", "rpc"), [
    (tokens.Role.CLIENT, Rpc.CREATE_BOT_SESSION),
    (tokens.Role.CLIENT, Rpc.UPDATE_BOT_SESSION),
    (tokens.Role.CLIENT, Rpc.UPDATE_ACTION_RESULT),
    (tokens.Role.CLIENT, Rpc.CANCEL_OPERATION),
    (tokens.Role.CLIENT, Rpc.LIST_OPERATIONS),
    (tokens.Role.WORKER, Rpc.EXECUTE),
    (tokens.Role.WORKER, Rpc.UPDATE_ACTION_RESULT),
    (tokens.Role.WORKER, Rpc.GET_ACTION_RESULT),
    (tokens.Role.CACHE_WRITER, Rpc.CREATE_BOT_SESSION),
])
def test_the_rendered_acl_refuses_a_role_what_it_is_not_granted(doc: dict[str, Any], role: tokens.Role,
                                                                 rpc: Rpc) -> None:
    assert not _allowed(doc, INSTANCE, role.value, rpc.value)


def test_the_rendered_acl_allows_each_role_its_grants_on_its_instance_only(doc: dict[str, Any]) -> None:
    for role in tokens.Role:
        for rpc in Rpc:
            assert _allowed(doc, INSTANCE, role.value, rpc.value) is (rpc in acl.grants(role)), (role, rpc)
            assert not _allowed(doc, "another/instance", role.value, rpc.value)


def test_subjects_match_whole_and_only_their_own_role(doc: dict[str, Any]) -> None:
    assert _allowed(doc, INSTANCE, "goma-ext-cache-writer", "UpdateActionResult")
    for subject in ("goma-ext-cache-writer-x", "goma-ext-cache-writerX", "goma-ext-client\n", "xgoma-ext-client",
                    "", "goma.ext.cache.writer"):
        assert not any(_allowed(doc, INSTANCE, subject, r.value) for r in Rpc), subject
    assert [a["subject"] for a in doc[INSTANCE]["allow"]] == [acl.subject_pattern(r) for r in tokens.Role]


def test_the_default_instance_is_the_empty_name() -> None:
    assert set(yaml.safe_load(acl.render(""))) == {""}
    assert acl.render(INSTANCE) == acl.render(INSTANCE)  # deterministic


def _state(**kw: Any) -> manager.ClusterState:
    base = {"state": "/s", "port": 1000, "instance": "", "pg_port": 5, "pg_data": "/s/postgres", "pg_user": None,
            "server_venv": "/v", "workers": 1, "auth": "jwt", "pg_passfile": "/s/auth/pgpass"}
    return manager.ClusterState(**{**base, **kw})


def test_each_role_has_its_token_file_and_the_acl_sits_beside_the_config() -> None:
    st = _state()
    assert {r: st.token_file(r) for r in tokens.Role} == {
        tokens.Role.WORKER: Path("/s/auth/worker.token"), tokens.Role.CLIENT: Path("/s/auth/client.token"),
        tokens.Role.CACHE_WRITER: Path("/s/auth/cache-writer.token")}
    assert manager._server_settings(st).acl_file == Path("/s") / manager.ACL_FILE
    assert manager._server_settings(_state(auth="none")).acl_file is None


def test_a_worker_host_is_no_client_its_worker_token_only_probes() -> None:
    st = _state(role="worker", port=0, pg_port=0, pg_data="", server_url="grpcs://10.0.0.5:2000",
                tls_ca="/k/ca.pem", worker_token_file="/t/worker.token")
    assert st.client_config().token_file is None  # Execute with the worker token would be refused anyway
    assert st.probe_config().token_file == Path("/t/worker.token")  # GetCapabilities: every role may
    assert _state().probe_config().token_file == Path("/s/auth/client.token")


def test_start_mints_a_token_per_role_0600_each_with_its_subject(tmp_path: Path) -> None:
    st = _state(state=str(tmp_path))
    manager.ensure_tokens(st)
    secret = secretfiles.read_private(tmp_path / "auth" / secretfiles.JWT_SECRET)
    for role in tokens.Role:
        path = st.token_file(role)
        assert path is not None and stat.S_IMODE(path.stat().st_mode) == 0o600
        claims = tokens.verify(secret, secretfiles.read_private(path))
        assert claims is not None and claims.subject == role.value
    assert (tmp_path / "auth" / "cache-writer.token").is_file()


def test_start_and_status_say_where_the_cache_writer_token_is(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from goma_ext.cluster.cli import _print_started

    st = _state(state=str(tmp_path), worker_socket=str(tmp_path / "run" / "bgd.sock"))
    _print_started(st, tmp_path)
    out = capsys.readouterr().out
    assert f"{tmp_path / 'auth' / 'cache-writer.token'}" in out
    assert f"on this host, grpc://unix:{tmp_path / 'run' / 'bgd.sock'}" in out  # for clients of the cluster's user
    st.save()
    assert manager.status(tmp_path)["cache_writer_token"] == str(tmp_path / "auth" / "cache-writer.token")
