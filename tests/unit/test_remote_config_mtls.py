"""[hermetic] mTLS client settings: client_cert/client_key are validated in one line each, read into the channel's
credentials (a real in-process TLS server that requires a client certificate checks them) and travel to the
thin client, the proxy (part of its key) and the ninja command like ca_file."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from concurrent import futures
from dataclasses import replace
from pathlib import Path
from typing import Any

import grpc
import pytest

from goma_ext.cluster import pki
from goma_ext.reapi.channel import open_channel, tls_material
from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.remote import proxy_client
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig, explain_failure, load_config
from goma_ext.remote.thin_client import parse
from goma_ext.remote.wrapper import wrap_command

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command (Debian openssl)")


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    pki.make(d, ["localhost", "127.0.0.1"], ["alice"])
    return d


def _mtls(certs: Path, port: int = 1, client: str | None = "alice") -> RemoteConfig:
    cert, key = pki.client_files(certs, client) if client else (None, None)
    return RemoteConfig(endpoint=f"grpcs://localhost:{port}", ca_file=certs / pki.CA_CERT, client_cert=cert,
                        client_key=key)


def test_settings_from_yaml_and_environment() -> None:
    cfg = load_config({"endpoint": "grpcs://h:1", "client_cert": "c.pem", "client_key": "k.pem"}, {})
    assert cfg is not None and (cfg.client_cert, cfg.client_key) == (Path("c.pem"), Path("k.pem"))
    env = {"GOMA_EXT_REMOTE_CLIENT_CERT": "/e/c.pem", "GOMA_EXT_REMOTE_CLIENT_KEY": "/e/k.pem"}
    cfg = load_config({"endpoint": "grpcs://h:1", "client_cert": "c.pem", "client_key": "k.pem"}, env)
    assert cfg is not None and (cfg.client_cert, cfg.client_key) == (Path("/e/c.pem"), Path("/e/k.pem"))


@pytest.mark.parametrize(("section", "words"), [
    ({"endpoint": "grpcs://h:1", "client_cert": "c.pem"}, "set both or neither"),
    ({"endpoint": "grpcs://h:1", "client_key": "k.pem"}, "set both or neither"),
    ({"endpoint": "grpc://127.0.0.1:1", "client_cert": "c.pem", "client_key": "k.pem"}, "is not grpcs://"),
])
def test_incomplete_or_plaintext_client_certificates_are_one_line(section: dict[str, str], words: str) -> None:
    with pytest.raises(RemoteConfigError) as e:
        load_config(section, {})
    assert words in str(e.value) and "\n" not in str(e.value)


@needs_openssl
def test_tls_material_reads_the_pem_files(certs: Path) -> None:
    tls = tls_material(_mtls(certs))
    assert tls.root_certificates == (certs / pki.CA_CERT).read_bytes()
    assert tls.certificate_chain == pki.client_files(certs, "alice")[0].read_bytes()
    assert tls.private_key == pki.client_files(certs, "alice")[1].read_bytes()
    assert tls_material(_mtls(certs, client=None)).private_key is None


@needs_openssl
def test_an_unreadable_or_wrong_file_names_the_setting_and_the_file(certs: Path, tmp_path: Path) -> None:
    cfg = _mtls(certs)
    missing = tmp_path / "gone.key"
    with pytest.raises(RemoteConfigError, match=f"^remote client_key {missing}: No such file or directory$"):
        tls_material(replace(cfg, client_key=missing))
    cert = tmp_path / "cert-as-key.pem"  # the certificate given twice, private to the user
    assert cfg.client_cert is not None
    cert.write_bytes(cfg.client_cert.read_bytes())
    cert.chmod(0o600)
    with pytest.raises(RemoteConfigError, match=f"^remote client_key {cert}: not a PEM private key$"):
        tls_material(replace(cfg, client_key=cert))
    key = tmp_path / "open.key"  # a key others may read: refused once it is known to be a key
    assert cfg.client_key is not None
    key.write_bytes(cfg.client_key.read_bytes())
    key.chmod(0o644)
    with pytest.raises(RemoteConfigError, match=f"^remote client_key {key}: mode 644 lets other users read or "
                                                f"change a secret; chmod 600 {key}$"):
        tls_material(replace(cfg, client_key=key))
    cert.chmod(0o644)  # a certificate given as the key: the wrong file, whatever its mode
    with pytest.raises(RemoteConfigError, match=f"^remote client_key {cert}: not a PEM private key$"):
        tls_material(replace(cfg, client_key=cert))
    with pytest.raises(RemoteConfigError, match=f"^remote client_cert {cfg.client_key}: not a PEM certificate$"):
        tls_material(replace(cfg, client_cert=cfg.client_key))


@pytest.fixture
def mtls_server(certs: Path) -> Iterator[int]:
    """An in-process gRPC server on 127.0.0.1 that requires a client certificate signed by the test CA."""
    server = grpc.server(futures.ThreadPoolExecutor(2))
    echo: grpc.RpcMethodHandler = grpc.unary_unary_rpc_method_handler(lambda request, context: request)
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("t.T", {"Echo": echo})])
    creds = grpc.ssl_server_credentials(
        [((certs / pki.SERVER_KEY).read_bytes(), (certs / pki.SERVER_CERT).read_bytes())],
        root_certificates=(certs / pki.CA_CERT).read_bytes(), require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    try:
        yield port
    finally:
        server.stop(None)


def _echo(cfg: RemoteConfig) -> bytes:
    with open_channel(cfg) as ch:
        call: Any = ch.unary_unary("/t.T/Echo")  # untyped bytes in and out
        return bytes(call(b"ping", timeout=10))


@needs_openssl
def test_the_channel_presents_the_client_certificate(certs: Path, mtls_server: int, tmp_path: Path) -> None:
    assert _echo(_mtls(certs, mtls_server)) == b"ping"
    with pytest.raises(grpc.RpcError) as e:  # no certificate: the server ends the handshake
        _echo(_mtls(certs, mtls_server, client=None))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    hint = explain_failure(_mtls(certs, mtls_server, client=None), str(e.value.details()))
    assert "TLS handshake failed" in hint and "remote.client_cert" in hint
    other = tmp_path / "other"  # a certificate from another CA is refused as well
    pki.make(other, [], ["mallory"])
    cert, key = pki.client_files(other, "mallory")
    with pytest.raises(grpc.RpcError):
        _echo(replace(_mtls(certs, mtls_server), client_cert=cert, client_key=key))


def test_the_hint_is_only_for_connections_closed_during_tls_set_up() -> None:
    tls = RemoteConfig(endpoint="grpcs://h:1")
    refused = "Capabilities: UNAVAILABLE: failed to connect to all addresses; last error: Connection refused"
    assert explain_failure(tls, refused) == refused
    closed = "Capabilities: UNAVAILABLE: failed to connect to all addresses; last error: UNAVAILABLE: Socket closed"
    assert explain_failure(RemoteConfig(endpoint="grpc://h:1"), closed) == closed
    assert explain_failure(tls, closed).endswith("the server may require a client certificate: remote.client_cert)")


def test_client_certificates_travel_like_the_ca_file(tmp_path: Path) -> None:
    cfg = RemoteConfig(endpoint="grpcs://h:9", ca_file=Path("ca.pem"), client_cert=Path("c.pem"),
                       client_key=Path("k.pem"))
    cmd = wrap_command(["clang-19", "-c"], cfg, launcher=["goma-ext", "run"])
    assert cmd[cmd.index("--client-cert") + 1] == "c.pem" and cmd[cmd.index("--client-key") + 1] == "k.pem"
    opts, _ = parse(cmd[2:]) or ({}, [])
    assert (opts["client_cert"], opts["client_key"]) == ("c.pem", "k.pem")
    argv = proxy_client.serve_argv(cfg, tmp_path, None)
    assert argv[argv.index("--client-cert") + 1] == str(tmp_path / "c.pem")
    assert argv[argv.index("--client-key") + 1] == str(tmp_path / "k.pem")


def test_the_client_certificate_is_part_of_the_proxy_key() -> None:
    """Clients presenting different certificates (or none) never share a proxy; without one the key is unchanged."""
    base = RemoteConfig(endpoint="grpcs://h:9", ca_file=Path("ca.pem"))
    alice = replace(base, client_cert=Path("alice.crt"), client_key=Path("alice.key"))
    bob = replace(base, client_cert=Path("bob.crt"), client_key=Path("alice.key"))
    keys = {proxy_client.endpoint_key(c, Path("/b/out")) for c in (base, alice, bob)}
    assert len(keys) == 3
    assert proxy_client.endpoint_key(base, Path("/b/out")) == wire.endpoint_key(
        "/b/out", "grpcs://h:9", "", "ca.pem", None, "")
    thin = wire.endpoint_key("/b/out", "grpcs://h:9", "", "ca.pem", None, "", client_cert="./alice.crt",
                             client_key="alice.key")
    assert proxy_client.endpoint_key(alice, Path("/b/out")) == thin
