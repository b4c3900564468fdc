"""[scale] gRPC compression for a slow link: `remote.compression: gzip` compresses what the client's channel sends
(checked on the bytes that cross a counting relay to a real in-process gRPC server), travels like the other
connection settings (command line, thin client, proxy key, `proxy serve`), and `goma-ext cluster start
--compression gzip` sets BuildGrid's `grpc-compression`. The build through a shaped link against a real cluster
with both sides compressing is in tests/remote/test_shaped_link.py."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
import yaml

from goma_ext.cluster import server
from goma_ext.cluster.postgres import ClusterError
from goma_ext.cluster.roles import Role, RoleOptions, check
from goma_ext.reapi.channel import open_channel
from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.remote import proxy_client
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig, carried_settings, load_config
from goma_ext.remote.thin_client import parse
from goma_ext.remote.wrapper import wrap_command

TEXT = b"an ELF object compresses about threefold; this text a good deal more. " * 20000


class _Relay:
    """A TCP relay to PORT counting the bytes each way (what a link would carry)."""

    def __init__(self, port: int) -> None:
        self.port, self.up, self.down = port, 0, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.sockets: list[socket.socket] = []
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.port))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, "up"), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, "down"), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, way: str) -> None:
        try:
            while data := src.recv(1 << 16):
                with self._lock:
                    setattr(self, way, getattr(self, way) + len(data))
                dst.sendall(data)
            dst.shutdown(socket.SHUT_WR)
        except OSError:  # the other way closed first, or close() below
            pass

    def close(self) -> None:
        self.listener.close()
        for s in self.sockets:
            s.close()


@pytest.fixture(params=["off", "gzip"])
def echo(request: pytest.FixtureRequest) -> Iterator[tuple[str, _Relay]]:
    """An echo server that answers with compression REQUEST.param (as BuildGrid's `grpc-compression` does) behind
    a counting relay."""
    class Echo(grpc.GenericRpcHandler):
        def service(self, details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
            return grpc.unary_unary_rpc_method_handler(lambda req, ctx: req)

    compression = grpc.Compression.Gzip if request.param == "gzip" else grpc.Compression.NoCompression
    srv = grpc.server(futures.ThreadPoolExecutor(2), handlers=[Echo()], compression=compression)
    port = srv.add_insecure_port("127.0.0.1:0")
    srv.start()
    relay = _Relay(port)
    try:
        yield request.param, relay
    finally:
        relay.close()
        srv.stop(None)


@pytest.mark.parametrize("client", ["off", "gzip"])
def test_each_side_compresses_what_it_sends(client: str, echo: tuple[str, _Relay]) -> None:
    server_side, relay = echo
    cfg = RemoteConfig(endpoint=f"grpc://{relay.address}", compression=client)
    with open_channel(cfg) as channel:
        assert channel.unary_unary("/echo/Echo")(TEXT, timeout=30) == TEXT
    # each way is counted before it is passed on: the answer's bytes are in once the call returns
    small, whole = len(TEXT) // 10, len(TEXT)
    assert (relay.up < small) if client == "gzip" else (relay.up >= whole), (client, relay.up)
    assert (relay.down < small) if server_side == "gzip" else (relay.down >= whole), (server_side, relay.down)


def test_the_setting_is_read_checked_and_carried(tmp_path: Path) -> None:
    cfg = load_config({"endpoint": "grpc://127.0.0.1:1", "compression": "gzip"}, {})
    assert cfg is not None and cfg.compression == "gzip"
    env = load_config({"endpoint": "grpc://127.0.0.1:1"}, {"GOMA_EXT_REMOTE_COMPRESSION": "gzip"})
    assert env is not None and env.compression == "gzip"
    with pytest.raises(RemoteConfigError, match=r"^remote.compression 'zstd': expected one of off, gzip$"):
        load_config({"endpoint": "grpc://127.0.0.1:1", "compression": "zstd"}, {})
    assert "compression" not in carried_settings(RemoteConfig(endpoint="grpc://h:1"))
    cmd = wrap_command(["clang-19", "-c"], cfg, launcher=["goma-ext", "run"])
    assert cmd[cmd.index("--compression") + 1] == "gzip"
    opts, _ = parse(cmd[2:]) or ({}, [])
    assert opts["compression"] == "gzip"
    argv = proxy_client.serve_argv(cfg, tmp_path, None)
    assert argv[argv.index("--compression") + 1] == "gzip"


def test_compression_selects_its_own_proxy_and_off_keeps_the_key() -> None:
    """A compressing client and a plain one do not share a channel; the thin client computes the same key."""
    plain = RemoteConfig(endpoint="grpc://127.0.0.1:9")
    gzip = RemoteConfig(endpoint="grpc://127.0.0.1:9", compression="gzip")
    assert proxy_client.endpoint_key(plain, Path("/b")) == wire.endpoint_key("/b", "grpc://127.0.0.1:9", "", None,
                                                                             None, "", compression="off")
    assert proxy_client.endpoint_key(gzip, Path("/b")) != proxy_client.endpoint_key(plain, Path("/b"))
    assert proxy_client.endpoint_key(gzip, Path("/b")) == wire.endpoint_key("/b", "grpc://127.0.0.1:9", "", "", "",
                                                                            "", compression="gzip")


def test_the_cluster_sets_buildgrids_grpc_compression() -> None:
    def render(**kw: str) -> dict[str, object]:
        settings = server.ServerSettings(port=1, db_url="postgresql+psycopg2://bgd@127.0.0.1:5/bgd",
                                         cas_dir=Path("/s/cas"), **kw)
        return yaml.load(server.render_config(settings), Loader=yaml.BaseLoader)

    assert "grpc-compression" not in render()
    assert render(compression="gzip")["grpc-compression"] == "Gzip"
    with pytest.raises(ClusterError, match="^--compression is a server option; --role worker only runs workers$"):
        check(RoleOptions(Role.WORKER, server="grpc://h:1", compression="gzip"))
    check(RoleOptions(Role.ALL, compression="gzip"))
