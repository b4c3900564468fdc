"""[sandbox] The cluster's own services authenticate: BuildGrid's config (JWT, TLS-only channels), the tokens the
cluster mints, its 0600 secret files and PostgreSQL's connection string (a password file, never the password)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from goma_ext.cluster import manager, secretfiles, tokens
from goma_ext.cluster.postgres import ClusterError, Postgres, _trusts
from goma_ext.cluster.server import ServerSettings, render_config


class _TagLoader(yaml.SafeLoader):
    pass


def _untag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return {"!": suffix, **loader.construct_mapping(node, deep=True)}
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_TagLoader.add_multi_constructor("!", _untag)


def _render(**kw: Any) -> dict[str, Any]:
    settings = ServerSettings(port=1000, db_url="postgresql+psycopg2://bgd@127.0.0.1:5/bgd", cas_dir=Path("/c"), **kw)
    return yaml.load(render_config(settings), Loader=_TagLoader)


TLS = {"tls_port": 2000, "tls_cert": Path("/k/server.crt"), "tls_key": Path("/k/server.key")}


def test_without_tls_the_one_channel_is_plaintext() -> None:
    assert [(c["address"], c["insecure-mode"]) for c in _render()["server"]] == [("127.0.0.1:1000", True)]


def test_with_tls_there_is_no_plaintext_channel_unless_asked_for() -> None:
    channels = _render(plaintext=False, **TLS)["server"]
    assert [(c["address"], c["insecure-mode"]) for c in channels] == [("127.0.0.1:2000", False)]
    assert channels[0]["credentials"] == {"tls-server-key": "/k/server.key", "tls-server-cert": "/k/server.crt"}
    both = _render(plaintext=True, **TLS)["server"]
    assert [(c["address"], c["insecure-mode"]) for c in both] == [("127.0.0.1:1000", True), ("127.0.0.1:2000", False)]


def test_no_channel_at_all_is_refused() -> None:
    with pytest.raises(ClusterError, match="no channel"):
        _render(plaintext=False)


def test_jwt_authorization_does_not_exempt_localhost_and_names_the_acl() -> None:
    auth = _render(jwt_secret_file=Path("/s/jwt-hs256.secret"), acl_file=Path("/s/buildgrid-acl.yml"))["authorization"]
    assert auth == {"method": "jwt", "algorithm": "hs256", "secret": "/s/jwt-hs256.secret",
                    "acl-config": "/s/buildgrid-acl.yml", "allow-localhost-requests": False}
    with pytest.raises(ClusterError, match="any token call any RPC"):  # JWT alone: any token, any RPC
        _render(jwt_secret_file=Path("/s/jwt-hs256.secret"))
    assert _render()["authorization"] == {"method": "none"}  # --auth none: no identities, so no ACL


def test_tokens_verify_with_their_key_only_and_carry_an_expiry() -> None:
    token = tokens.mint("k" * 43, tokens.Role.WORKER, now=1000.0, lifetime_s=60)
    claims = tokens.verify("k" * 43, token)
    assert claims == tokens.Claims("goma-ext-worker", 1060)
    assert tokens.verify("x" * 43, token) is None
    assert tokens.verify("k" * 43, token[:-2]) is None
    assert tokens.verify("k" * 43, "not.a-token") is None
    assert not tokens.still_good("k" * 43, token, now=1000.0)  # expires within the renewal margin
    assert tokens.still_good("k" * 43, tokens.mint("k" * 43, tokens.Role.CLIENT, now=1000.0), now=1000.0)


def test_secret_files_are_0600_in_a_0700_directory(tmp_path: Path) -> None:
    d = secretfiles.auth_dir(tmp_path)
    path = secretfiles.write_private(d / "s", secretfiles.new_secret())
    assert stat.S_IMODE(d.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(secretfiles.read_private(path)) >= 43
    path.chmod(0o644)
    with pytest.raises(ClusterError, match="lets others read"):
        secretfiles.read_private(path)


def test_postgres_url_names_the_password_file_not_the_password(tmp_path: Path) -> None:
    pg = Postgres(tmp_path / "pg", 5432, None, tmp_path / "auth" / "pgpass")
    assert pg.url == (f"postgresql+psycopg2://bgd@127.0.0.1:5432/bgd?passfile={tmp_path}/auth/pgpass"
                      "&require_auth=scram-sha-256")
    odd = Postgres(tmp_path / "pg", 5432, None, Path("/s t?a&t#e/auth/pgpass"))
    assert odd.url.endswith("?passfile=/s%20t%3Fa%26t%23e/auth/pgpass&require_auth=scram-sha-256")
    assert secretfiles.pgpass_line(5432, "bgd", "pw") == "127.0.0.1:5432:*:bgd:pw\n"
    assert _trusts("host all all 127.0.0.1/32 trust") and not _trusts("# host all all 127.0.0.1/32 trust")
    assert not _trusts("host all all 127.0.0.1/32 scram-sha-256")


def _state(**kw: Any) -> manager.ClusterState:
    base = {"state": "/s", "port": 1000, "instance": "", "pg_port": 5, "pg_data": "/s/postgres", "pg_user": None,
            "server_venv": "/v", "workers": 1}
    return manager.ClusterState(**{**base, **kw})


def test_endpoints_and_the_client_settings() -> None:
    tls = _state(tls_port=2000, tls_cert="/k/c", tls_key="/k/k", tls_ca="/k/ca", plaintext=False, auth="jwt")
    assert (tls.endpoint, tls.plaintext_endpoint) == ("grpcs://127.0.0.1:2000", None)
    cfg = tls.client_config()
    assert (cfg.ca_file, cfg.token_file) == (Path("/k/ca"), Path("/s/auth/client.token"))
    assert tls.token_file(tokens.Role.WORKER) == Path("/s/auth/worker.token")
    plain = _state(auth="none")
    assert (plain.endpoint, plain.tls_endpoint) == ("grpc://127.0.0.1:1000", None)
    assert plain.client_config().token_file is None


def test_tls_options_without_a_certificate_are_one_error(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="need --tls-cert"):
        manager._initial_state(manager.ClusterSpec(state=tmp_path, also_plaintext=True))
