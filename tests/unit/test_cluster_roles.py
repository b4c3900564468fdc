"""[hermetic] A cluster across hosts: the role options' one-line refusals, human sizes, the server role's BuildGrid
config (SQL-indexed disk CAS, redis action cache, a channel per listen address), its cleanup config and redis.conf,
and what each role's recorded state says about endpoints and tokens."""

from __future__ import annotations

import json
import shutil
import stat
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from goma_ext.cli import build_parser, main
from goma_ext.cluster import cli as cluster_cli
from goma_ext.cluster import manager, redis_server, roles, secretfiles, server, tokens
from goma_ext.cluster.postgres import ClusterError
from goma_ext.cluster.roles import Role, RoleOptions
from goma_ext.cluster.server import PersistentStore, ServerSettings, Watermarks
from tests.bounded import started

DB = "postgresql+psycopg2://bgd@127.0.0.1:5/bgd?passfile=/s/auth/pgpass"
STORE = PersistentStore(redis_socket=Path("/s/redis/redis.sock"), redis_password_file=Path("/s/auth/redis.password"))
TLS: dict[str, Any] = {"tls_port": 2000, "tls_cert": Path("/k/server.pem"), "tls_key": Path("/k/server.key"),
                       "plaintext": False}


class _TagLoader(yaml.SafeLoader):
    pass


def _untag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return {"!": suffix, **loader.construct_mapping(node, deep=True)}
    return {"!": suffix, "value": loader.construct_scalar(node)}  # type: ignore[arg-type]


_TagLoader.add_multi_constructor("!", _untag)


def _settings(**kw: Any) -> ServerSettings:
    return ServerSettings(port=1000, db_url=DB, cas_dir=Path("/s/cas"), instance="i", **kw)


def _render(**kw: Any) -> dict[str, Any]:
    return yaml.load(server.render_config(_settings(**kw)), Loader=_TagLoader)


def _services(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["!"]: s for s in doc["instances"][0]["services"]}


# -- role options -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("opts", "message"), [
    (RoleOptions(Role.WORKER), "--role worker needs --server grpcs://HOST:PORT"),
    (RoleOptions(Role.WORKER, server="10.0.0.5:8981"), "not a grpc:// or grpcs:// endpoint"),
    (RoleOptions(Role.WORKER, server="grpcs://10.0.0.5:1"), "needs --tls-ca"),
    (RoleOptions(Role.WORKER, server="grpc://h:1", listen=("0.0.0.0",)), "--listen is a server option"),
    (RoleOptions(Role.WORKER, server="grpc://h:1", cas_max_size="1G"), "--cas-max-size is a server option"),
    (RoleOptions(Role.SERVER), "--role server needs --tls-cert/--tls-key (or --plaintext"),
    (RoleOptions(Role.SERVER, plaintext=True, server="grpc://h:1"), "--server is for --role worker"),
    (RoleOptions(Role.SERVER, plaintext=True, token_file=Path("t")), "--token-file is for --role worker"),
    (RoleOptions(Role.SERVER, plaintext=True, tls_cert=Path("c")), "pick one"),
    (RoleOptions(Role.SERVER, plaintext=True, listen=("buildhost",)), "--listen buildhost: not an IP address"),
    (RoleOptions(Role.SERVER, plaintext=True, cas_max_size="lots"), "--cas-max-size: 'lots' is not a size"),
    (RoleOptions(Role.ALL, listen=("0.0.0.0",)), "--listen is for --role server"),
    (RoleOptions(Role.ALL, server="grpc://h:1"), "--server is for --role worker"),
])
def test_options_that_do_not_fit_the_role_are_one_line(opts: RoleOptions, message: str) -> None:
    with pytest.raises(ClusterError, match=message.replace("(", r"\(").replace("+", r"\+")) as e:
        roles.check(opts)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("opts", [
    RoleOptions(Role.ALL),
    RoleOptions(Role.SERVER, tls_cert=Path("c"), listen=("0.0.0.0", "10.0.0.5", "::"), cas_max_size="20G"),
    RoleOptions(Role.SERVER, plaintext=True),
    RoleOptions(Role.WORKER, server="grpcs://10.0.0.5:8981", tls_ca=Path("ca"), token_file=Path("t")),
    RoleOptions(Role.WORKER, server="grpc://10.0.0.5:8980"),
])
def test_options_that_fit_are_accepted(opts: RoleOptions) -> None:
    roles.check(opts)


def test_the_command_line_refuses_a_worker_without_a_server_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "start", "--role", "worker", "--state", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == ["goma-ext: error: --role worker needs --server grpcs://HOST:PORT (the server "
                                        "host's endpoint)"]
    assert not (tmp_path / "s" / manager.STATE_FILE).exists()


@pytest.mark.parametrize(("text", "size"), [
    ("20G", 20 << 30), ("512M", 512 << 20), ("1.5T", 3 << 39), ("300000", 300000), ("20GB", 20 << 30),
    ("20GiB", 20 << 30), ("64k", 64 << 10),
])
def test_sizes_take_human_units(text: str, size: int) -> None:
    assert roles.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "0", "-1G", "20X", "G"])
def test_sizes_that_are_not_are_refused(text: str) -> None:
    with pytest.raises(ClusterError):
        roles.parse_size(text)


# -- the server role's BuildGrid, cleanup and redis configs ----------------------------------------------------

def test_the_server_cas_is_an_sql_index_over_disk_and_the_action_cache_is_redis() -> None:
    doc = _render(store=STORE, **TLS)
    services = _services(doc)
    cas = services["cas"]["storage"]
    assert cas["!"] == "sql-index" and cas["storage"] == {"!": "disk-storage", "path": "/s/cas"}
    assert cas["sql"]["connection-string"] == DB and cas["max-inline-blob-size"] == 0
    assert services["bytestream"]["storage"] == cas
    cache = services["action-cache"]["cache"]
    assert cache["!"] == "redis-action-cache" and cache["storage"] == cas and cache["allow-updates"] is True
    assert cache["redis"] == {"!": "redis-connection", "host": "/s/redis/redis.sock", "port": 0,
                              "password": {"!": "read-file", "value": "/s/auth/redis.password"}}
    scheduler = services["execution"]["scheduler"]
    assert scheduler["storage"] == cas and scheduler["action-cache"] == cache


def test_one_storage_object_backs_every_service() -> None:
    """YAML anchors: BuildGrid builds one index (one connection pool), not one per service."""
    text = server.render_config(_settings(store=STORE, **TLS))
    assert text.count("!sql-index") == 1 and text.count("!redis-action-cache") == 1


def test_without_a_store_the_role_all_config_is_unchanged() -> None:
    services = _services(_render())
    assert services["cas"]["storage"] == {"!": "disk-storage", "path": "/s/cas"}
    assert services["action-cache"]["cache"]["!"] == "lru-action-cache"


def test_every_listen_address_gets_the_tls_channel() -> None:
    channels = _render(listen=("10.231.1.1", "10.231.2.1", "::"), **TLS)["server"]
    assert [(c["address"], c["insecure-mode"]) for c in channels] == [
        ("10.231.1.1:2000", False), ("10.231.2.1:2000", False), ("[::]:2000", False)]
    assert {c["credentials"]["tls-server-cert"] for c in channels} == {"/k/server.pem"}


def test_the_config_names_secret_files_and_holds_no_secret() -> None:
    settings = _settings(store=STORE, jwt_secret_file=Path("/s/auth/jwt"), acl_file=Path("/s/acl.yml"), **TLS)
    text = server.render_config(settings)
    assert "/s/auth/redis.password" in text and "/s/auth/pgpass" in text and "requirepass" not in text


def test_watermarks_keep_a_fifth_of_headroom() -> None:
    marks = Watermarks.for_max_size(20 << 30, refresh_accesstime_s=60)
    assert marks == Watermarks(high=20 << 30, low=16 << 30, batch=1 << 30, only_if_unused_for_s=120)
    small = Watermarks.for_max_size(10 << 20)
    assert small.low == 8 << 20 and small.batch == small.high - small.low


def test_the_cleanup_config_bounds_the_servers_own_index() -> None:
    settings = _settings(store=STORE, **TLS)
    doc = yaml.load(server.render_cleanup_config(settings, Watermarks.for_max_size(1 << 30)), Loader=_TagLoader)
    (job,) = doc["cleanup"]
    assert job["instance-name"] == "i" and job["high-watermark"] == 1 << 30 and job["low-watermark"] < 1 << 30
    assert job["index"] == _services(_render(store=STORE, **TLS))["cas"]["storage"]
    assert job["only-if-unused-for"] == {"seconds": 120}
    with pytest.raises(ClusterError, match="persistent store"):
        server.render_cleanup_config(_settings(), Watermarks.for_max_size(1 << 30))


def test_redis_listens_on_its_socket_alone_persists_and_evicts_least_recently_used() -> None:
    sock = Path("/s/redis/redis.sock")
    conf = redis_server.render_config(redis_server.RedisSettings(sock, Path("/s/redis"), 256 << 20), "pw123")
    lines = conf.splitlines()
    for want in ("port 0", "unixsocket /s/redis/redis.sock", "unixsocketperm 700", "appendonly yes", "dir /s/redis",
                 f"maxmemory {256 << 20}", "maxmemory-policy allkeys-lru", "requirepass pw123", "daemonize no"):
        assert want in lines
    assert not any(line.startswith("bind") for line in lines)
    with pytest.raises(ClusterError, match="password"):
        redis_server.render_config(redis_server.RedisSettings(sock, Path("/r"), 1), "two words")
    for bad in (Path("/s/" + "x" * 100 + "/redis.sock"), Path("/s/a b/redis.sock")):
        with pytest.raises(ClusterError, match="not usable as redis' socket"):
            redis_server.render_config(redis_server.RedisSettings(bad, Path("/r"), 1), "pw123")


def test_a_venv_made_before_redis_was_required_gets_it(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    (site / "psycopg2").mkdir(parents=True)
    (site / "psycopg2_binary-2.9.13.dist-info").mkdir()
    assert server._missing_modules(tmp_path) == ["redis>=4.5.1"]
    (site / "redis").mkdir()
    (site / "redis-4.5.0.dist-info").mkdir()
    assert server._missing_modules(tmp_path) == ["redis>=4.5.1"]  # older than the requirement's version
    (site / "redis-4.5.0.dist-info").rename(site / "redis-5.0.0b1.dist-info")
    assert server._missing_modules(tmp_path) == []  # a pre-release counts by its numbers: no pip run every start


def test_a_venv_whose_libpq_cannot_require_scram_gets_a_newer_psycopg2(tmp_path: Path) -> None:
    """Postgres.url asks libpq for require_auth, which the libpq of psycopg2-binary before 2.9.9 lacks."""
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    for d in ("psycopg2", "redis", "redis-5.0.1.dist-info", "psycopg2_binary-2.9.6.dist-info"):
        (site / d).mkdir(parents=True)
    assert server._missing_modules(tmp_path) == ["psycopg2-binary>=2.9.9"]
    (site / "psycopg2_binary-2.9.6.dist-info").rename(site / "psycopg2_binary-2.9.10.dist-info")
    assert server._missing_modules(tmp_path) == []


# -- each role's recorded state --------------------------------------------------------------------------------

def _state(tmp_path: Path, **kw: Any) -> manager.ClusterState:
    base: dict[str, Any] = {"state": str(tmp_path), "port": 1000, "instance": "", "pg_port": 5, "pg_data": "/p",
                            "pg_user": None, "server_venv": "/v", "workers": 0}
    return manager.ClusterState(**{**base, **kw})


def test_a_wildcard_server_probes_itself_on_loopback(tmp_path: Path) -> None:
    st = _state(tmp_path, role="server", listen=("0.0.0.0",), tls_port=2000, tls_ca="/k/ca.pem", plaintext=False,
                auth="jwt", redis_port=6400, cas_max_size=1 << 30)
    assert st.endpoint == "grpcs://127.0.0.1:2000" and st.ca_file == Path("/k/ca.pem")
    assert st.store == PersistentStore(tmp_path / "redis" / "redis.sock",
                                       tmp_path / secretfiles.AUTH_DIR / secretfiles.REDIS_PASSWORD)
    named = _state(tmp_path, role="server", listen=("10.0.0.5",), tls_port=2000, plaintext=False)
    assert named.endpoint == "grpcs://10.0.0.5:2000"


def test_a_worker_host_uses_its_servers_endpoint_and_the_token_it_was_given(tmp_path: Path) -> None:
    st = _state(tmp_path, role="worker", port=0, pg_port=0, pg_data="", server_url="grpcs://10.0.0.5:2000",
                tls_ca="/k/ca.pem", worker_token_file="/t/worker.token", auth="jwt", workers=2)
    assert st.endpoint == "grpcs://10.0.0.5:2000" and st.ca_file == Path("/k/ca.pem")
    assert st.token_file(tokens.Role.WORKER) == Path("/t/worker.token") and st.token_file(tokens.Role.CLIENT) is None
    assert st.probe_config().token_file == Path("/t/worker.token")  # `status` probes with it (GetCapabilities)
    assert st.client_config().token_file is None  # a worker host is no client: BuildGrid refuses it Execute
    assert st.plaintext_endpoint is None and st.tls_endpoint is None and st.store is None


def test_a_state_file_from_before_roles_is_a_role_all_host(tmp_path: Path) -> None:
    old = {k: v for k, v in asdict(_state(tmp_path, workers=2)).items()
           if k not in ("role", "listen", "cas_max_size", "ac_max_memory", "redis_port", "redis_pid", "cleanup_pid",
                        "server_url", "worker_token_file", "bot_id", "redis_socket")}
    (tmp_path / manager.STATE_FILE).write_text(json.dumps(old))
    st = manager.load(tmp_path)
    assert st is not None and st.host_role is Role.ALL and st.store is None
    assert st.endpoint == "grpc://127.0.0.1:1000"


def test_a_host_is_restarted_only_in_the_role_it_was_made_with(tmp_path: Path) -> None:
    _state(tmp_path, role="worker", server_url="grpc://h:1", workers=2).save()
    with pytest.raises(ClusterError, match="holds a --role worker host; start it with --role worker"):
        manager.start(manager.ClusterSpec(state=tmp_path, role=Role.SERVER))
    with pytest.raises(ClusterError, match="runs no server"):
        manager.stop(tmp_path, Role.SERVER)


def test_a_server_prints_what_worker_hosts_and_clients_need(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from goma_ext.cluster.cli import _print_started

    st = _state(tmp_path, role="server", listen=("0.0.0.0",), tls_port=2000, tls_ca="/k/ca.pem", plaintext=False,
                auth="jwt", redis_port=6400, cas_max_size=1 << 30)
    _print_started(st, tmp_path)
    out = capsys.readouterr().out
    auth = tmp_path / secretfiles.AUTH_DIR
    assert "listening on grpcs://0.0.0.0:2000 (every interface" in out
    assert f"copy the CA /k/ca.pem and the worker token {auth / secretfiles.WORKER_TOKEN} (keep it 0600)" in out
    assert "--role worker --server grpcs://SERVER-ADDRESS:2000 --tls-ca CA --token-file TOKEN" in out
    assert f"GOMA_EXT_REMOTE_TOKEN_FILE={auth / secretfiles.CLIENT_TOKEN}" in out
    assert "GOMA_EXT_REMOTE_CA_FILE=/k/ca.pem" in out


# -- the scheduler's polling ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("poll_s", "assign_s"), [(None, 0.01), (0.25, 0.05)])
def test_the_scheduler_polls_as_often_as_the_cluster_says(poll_s: float | None, assign_s: float) -> None:
    """The default keeps the benchmarks' 50 ms (assigner 10 ms); a test suite's clusters may poll less."""
    doc = _render(**({} if poll_s is None else {"poll_s": poll_s}))
    scheduler = _services(doc)["execution"]["scheduler"]
    want = poll_s or server.DEFAULT_POLL_S
    assert scheduler["poll-interval"] == want and scheduler["bot-poll-interval"] == want
    assert scheduler["assigners"][0]["interval"] == assign_s


def test_the_poll_interval_comes_from_the_command_line_and_a_wrong_one_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(["cluster", "start", "--state", str(tmp_path / "s"), "--poll-interval", "0.25"])
    assert cluster_cli._spec(args, tmp_path / "s").poll_s == 0.25
    for wrong in ("0", "x", "11"):
        with pytest.raises(SystemExit):
            main(["cluster", "start", "--state", str(tmp_path / "s"), "--poll-interval", wrong])
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--poll-interval: not a number of seconds between 0.001 and 10" in err[0], err


@pytest.mark.parametrize(("flags", "named"), [
    (["--tls-cert", "c.pem", "--tls-key", "k.pem"], "--tls-cert"),
    (["--auth", "none"], "--auth none"),
    (["--instance", "other"], "--instance other"),
])
def test_start_refuses_options_an_existing_cluster_was_not_made_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], named: str
) -> None:
    """A restart is `start` on the state again; options asking for another transport or authentication are one
    line, not silently left out (the cluster would serve plaintext where TLS was asked for)."""
    _state(tmp_path, workers=2, auth="jwt", instance="").save()
    assert main(["cluster", "start", "--state", str(tmp_path), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds a cluster made without" in err[0] and named in err[0], err


def test_a_server_host_makes_no_sandbox_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server host runs no worker: it must not make (and then never remove) a temporary sandbox directory, which
    a root cluster whose state directory others cannot reach would otherwise get."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(manager.sandboxing.tempfile, "tempdir", str(temp))
    monkeypatch.setattr(manager, "choose_data_dir", lambda state: (state / "postgres", None))
    monkeypatch.setattr(manager.sandboxing, "searchable_by_others", lambda path: False)
    monkeypatch.setattr(manager.sandboxing.os, "geteuid", lambda: 0)
    st = manager._initial_state(manager.ClusterSpec(state=tmp_path / "state", role=Role.SERVER))
    assert st.sandbox_dir is None and not st.sandbox_dir_owned and list(temp.iterdir()) == []
    worker_host = manager._initial_state(manager.ClusterSpec(state=tmp_path / "state", run_as="nobody"))
    assert worker_host.sandbox_dir_owned and Path(worker_host.sandbox_dir or "").parent == temp  # the check bites


def test_a_redis_from_before_the_socket_is_stopped_and_given_one(tmp_path: Path) -> None:
    """A state file from before redis' socket names the port its redis listens on: start stops that redis (and
    BuildGrid, whose config names the port) and moves it to STATE/redis/redis.sock; a long STATE gets a short
    directory of its own in the temp dir."""
    fake = tmp_path / "bin" / "redis-server"  # what redis' process title starts with
    fake.parent.mkdir()
    fake.symlink_to(shutil.which("sleep") or "/bin/sleep")
    other = started(["sleep", "60"])  # a process of ours that is not redis
    old = started([str(fake), "60"])  # the redis a stop must reach, group and all
    try:
        assert manager._own_redis_socket(_state(tmp_path, role="server", redis_port=6400, redis_pid=other.pid))
        assert other.poll() is None  # not signalled
        (tmp_path / "redis").rmdir()
        st = manager._own_redis_socket(_state(tmp_path, role="server", redis_port=6400, redis_pid=old.pid))
        assert old.wait(timeout=20) is not None and st.redis_pid is None and st.server_pid is None
    finally:
        for p in (old, other):
            p.kill()
            p.wait()
    assert st.redis_socket == str(tmp_path / "redis" / "redis.sock")
    assert stat.S_IMODE((tmp_path / "redis").stat().st_mode) == 0o700
    assert manager._own_redis_socket(st) == st  # kept while its directory is ours
    deep = tmp_path / ("d" * 100)
    deep.mkdir()
    moved = manager._own_redis_socket(_state(deep, role="server", redis_port=0))
    assert moved.redis_socket is not None and moved.redis_socket.startswith("/tmp/goma-ext-redis-")
    try:
        assert stat.S_IMODE(Path(moved.redis_socket).parent.stat().st_mode) == 0o700
    finally:
        Path(moved.redis_socket).parent.rmdir()
    assert manager._own_redis_socket(_state(tmp_path, role="worker", server_url="grpc://h:1")).redis_socket is None
