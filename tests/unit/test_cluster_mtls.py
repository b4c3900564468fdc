"""[hermetic] The cluster can require client certificates: BuildGrid's `tls-client-certs`, the start options'
checks, the workers' certificate in cluster.json and on the probe; and `goma-ext cluster pki`, which makes them."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from goma_ext.cluster import manager, pki
from goma_ext.cluster.postgres import ClusterError
from tests.unit.test_cluster_auth_config import TLS, _render

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command (Debian openssl)")


def _channels(**kw: Any) -> list[dict[str, Any]]:
    return list(_render(plaintext=False, **TLS, **kw)["server"])


def test_the_tls_channel_requires_client_certificates_only_when_asked() -> None:
    assert "tls-client-certs" not in _channels()[0]["credentials"]
    assert _channels(tls_client_ca=Path("/k/clients-ca.crt"))[0]["credentials"] == {
        "tls-server-key": "/k/server.key", "tls-server-cert": "/k/server.crt", "tls-client-certs": "/k/clients-ca.crt"}


@pytest.mark.parametrize(("kw", "words"), [
    ({"tls_client_ca": "ca"}, "need --tls-cert"),
    ({"tls_cert": "crt", "tls_key": "key", "worker_cert": "w.crt"}, "give both or neither"),
    ({"tls_cert": "crt", "tls_key": "key", "tls_client_ca": "ca", "also_plaintext": True}, "--also-plaintext"),
    ({"tls_cert": "crt", "tls_key": "key", "tls_client_ca": "ca"}, "needs --worker-cert"),
    ({"tls_cert": "crt", "tls_key": "key", "tls_client_ca": "nope", "worker_cert": "w.crt", "worker_key": "w.key"},
     "--tls-client-ca nope: no such file"),
])
def test_client_certificate_options_are_checked_in_one_line(kw: dict[str, Any], words: str, tmp_path: Path) -> None:
    for name in ("crt", "key", "ca", "w.crt", "w.key"):
        (tmp_path / name).write_text("x")
    paths: dict[str, Any] = {k: v if isinstance(v, bool) else tmp_path / v if v != "nope" else Path("nope")
                             for k, v in kw.items()}
    with pytest.raises(ClusterError) as e:
        manager._check_client_certs(manager.ClusterSpec(state=tmp_path, **paths))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_the_probe_presents_the_workers_certificate_over_tls_only() -> None:
    base: dict[str, Any] = {"state": "/s", "port": 1000, "instance": "", "pg_port": 5, "pg_data": "/s/pg",
                            "pg_user": None, "server_venv": "/v", "workers": 1,
                            "worker_cert": "/k/w.crt", "worker_key": "/k/w.key"}
    cfg = manager.ClusterState(**base, tls_port=2000, tls_ca="/k/ca", tls_client_ca="/k/cca").client_config()
    assert (cfg.client_cert, cfg.client_key) == (Path("/k/w.crt"), Path("/k/w.key"))
    assert manager.ClusterState(**base).client_config().client_cert is None  # grpc:// takes no certificate


@needs_openssl
def test_pki_makes_a_ca_a_server_and_clients_with_private_keys(tmp_path: Path) -> None:
    made = pki.make(tmp_path, ["localhost", "127.0.0.1", "::1"], ["alice", "worker-0"], days=2)
    assert [f.path.name for f in made] == ["ca.crt", "ca.key", "server.crt", "server.key", "client-alice.crt",
                                           "client-alice.key", "client-worker-0.crt", "client-worker-0.key"]
    for f in made:
        private = f.path.suffix == ".key"
        assert (stat.S_IMODE(f.path.stat().st_mode) == 0o600) == private, f.path
    certs = [str(f.path) for f in made if f.path.suffix == ".crt" and f.path.name != "ca.crt"]
    verify = subprocess.run(["openssl", "verify", "-CAfile", str(tmp_path / "ca.crt"), *certs], capture_output=True,
                            text=True, check=False)
    assert verify.returncode == 0, verify.stderr
    san = subprocess.run(["openssl", "x509", "-in", str(tmp_path / "server.crt"), "-noout", "-ext", "subjectAltName"],
                         capture_output=True, text=True, check=True).stdout
    assert "DNS:localhost, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1" in san
    again = pki.make(tmp_path, [], ["bob"])  # the CA is kept, so later clients share it; nothing is overwritten
    assert again[0].what == "CA certificate (kept)" and len(again) == 3
    with pytest.raises(ClusterError, match=r"client-bob\.crt exists"):
        pki.make(tmp_path, [], ["bob"])


@pytest.mark.parametrize(("servers", "clients", "words"), [
    (["a,DNS:evil"], [], "neither an IP address nor a DNS name"),
    ([], ["../x"], "letters, digits"),
    ([], [".hidden"], "letters, digits"),
])
def test_pki_refuses_names_that_would_change_the_files_or_extensions(servers: list[str], clients: list[str],
                                                                     words: str, tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=words):
        pki.make(tmp_path / "d", servers, clients)
    assert not (tmp_path / "d").exists()


@needs_openssl
def test_pki_command_prints_one_line_per_file(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "goma_ext.cli", "cluster", "pki", str(tmp_path), "--server-name",
                          "127.0.0.1", "--client", "w"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert len(lines) == 6 and lines[2] == f"{tmp_path / 'server.crt'}  server certificate (IP:127.0.0.1)"


def test_pki_keeps_no_ca_it_does_not_own_alone(tmp_path: Path) -> None:
    """A CA found in DIR signs the server's and the workers' certificates: one another user put there (or whose key
    others can read) would let them issue certificates the cluster trusts."""
    pki.make(tmp_path / "d", [], [])
    (tmp_path / "d" / pki.CA_KEY).chmod(0o644)
    with pytest.raises(ClusterError, match="not a private file of yours"):
        pki.make(tmp_path / "d", [], ["bob"])
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(ClusterError, match="writable by others"):
        pki.make(shared, [], [])
    if os.geteuid() == 0:
        theirs = tmp_path / "theirs"
        theirs.mkdir()
        os.chown(theirs, 65534, 65534)
        with pytest.raises(ClusterError, match="owned by uid 65534"):
            pki.make(theirs, [], [])
        assert list(theirs.iterdir()) == []
