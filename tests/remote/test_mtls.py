"""[hermetic] mTLS against a real BuildGrid 0.4.4 that requires client certificates (`cluster start --tls-client-ca`,
certificates from `goma-ext cluster pki`): its workers register with theirs, a client without one gets one warning
line naming the TLS handshake and the same bytes from a local run, a client with one runs remotely, in its own
process and through the proxy (which a client without a certificate does not share)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from bench.subjects.thin_program import ThinProgram
from goma_ext.cluster import manager, pki, tokens
from goma_ext.reapi import capabilities, retry
from goma_ext.reapi.channel import open_channel
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote import stats
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.wrapper import WARNING_PREFIX
from tests import dtlto_program
from tests.conftest import REPO
from tests.remote.conftest import INSTANCE, TEST_POLL_S, WrapperRun, records
from tests.system_users import temporary_user

THIN_CLIENT = REPO / "goma_ext" / "remote" / "thin_client.py"
COMPILERS = ("clang-19", "clang++-19", "/usr/lib/llvm-19/bin/clang", "/usr/lib/llvm-19/bin/clang++",
             "/usr/lib/llvm-22/bin/clang")  # the last: what lld 22 names for DTLTO jobs


@dataclass(frozen=True)
class MtlsCluster:
    """A running cluster that requires client certificates, its PKI directory and this module's proxy directory."""

    st: manager.ClusterState
    certs: Path
    proxy_dir: Path

    @property
    def endpoint(self) -> str:
        # The server certificate's IP subjectAltName. Not localhost: gRPC would try ::1 too (nothing listens there)
        # and might report that address's `Connection refused` as its last error instead of the closed handshake.
        return f"grpcs://127.0.0.1:{self.st.tls_port}"

    @property
    def token_file(self) -> Path:
        path = self.st.token_file(tokens.Role.CLIENT)
        assert path is not None
        return path

    def flags(self, client: str | None) -> list[str]:
        """`goma-ext run` settings: the CA, the client token and, for CLIENT, its certificate and key."""
        flags = ["--ca-file", str(self.certs / pki.CA_CERT), "--token-file", str(self.token_file)]
        if client is not None:
            cert, key = pki.client_files(self.certs, client)
            flags += ["--client-cert", str(cert), "--client-key", str(key)]
        return flags

    def config(self, client: str | None) -> RemoteConfig:
        cert, key = pki.client_files(self.certs, client) if client else (None, None)
        return RemoteConfig(endpoint=self.endpoint, instance=INSTANCE, ca_file=self.certs / pki.CA_CERT,
                            client_cert=cert, client_key=key, token_file=self.token_file, max_attempts=1)

    def env(self, salt: str, proxy_dir: Path | None = None) -> dict[str, str]:
        """The test's environment without another cluster's settings (the session cluster's token file). Actions
        use the worker's own compilers (`toolchain: host`, which the cluster allows): what is tested is the
        channel's certificates; shipping clang 19 and 22 with their libraries as inputs over TLS (hashed, uploaded,
        fetched by the worker) was a third of this module's CPU, ~10 s (the other remote tests ship compilers)."""
        clean = {k: v for k, v in os.environ.items() if not k.startswith("GOMA_EXT_REMOTE")}
        return {**clean, "GOMA_EXT_CACHE_SALT": salt, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE,
                "GOMA_EXT_REMOTE_TOOLCHAIN": "host", wire.STATE_DIR_ENV: str(proxy_dir or self.proxy_dir)}


def _stop_proxies(proxy_dir: Path) -> None:
    subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "stop"], capture_output=True, timeout=120,
                   env={**os.environ, wire.STATE_DIR_ENV: str(proxy_dir)}, check=False)


@pytest.fixture
def own_proxy_dir() -> Iterator[Path]:
    """A proxy state directory of the test's own, so `proxy status` shows its proxies only."""
    directory = Path(tempfile.mkdtemp(prefix="gxm-"))
    try:
        yield directory
    finally:
        _stop_proxies(directory)
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MtlsCluster]:
    """One worker, JWT (the default) and TLS only; stopped and removed at the end, also after a failed start."""
    base = tmp_path_factory.mktemp("mtls")
    certs = base / "pki"
    pki.make(certs, ["localhost", "127.0.0.1"], ["worker", "alice"])
    with ExitStack() as stack:
        reachable = Path(tempfile.mkdtemp(prefix="gx-mtls-"))
        stack.callback(shutil.rmtree, reachable, True)
        os.chmod(reachable, 0o711)
        proxy_dir = Path(tempfile.mkdtemp(prefix="gxm-"))  # short: socket paths are limited to 107 bytes
        stack.callback(shutil.rmtree, proxy_dir, True)
        runner = stack.enter_context(temporary_user("gxmtls")) if os.geteuid() == 0 else None
        worker_cert, worker_key = pki.client_files(certs, "worker")
        spec = manager.ClusterSpec(
            state=base / "state", workers=1,
            server_venv=Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv")),
            tls_cert=certs / pki.SERVER_CERT, tls_key=certs / pki.SERVER_KEY, tls_ca=certs / pki.CA_CERT,
            tls_client_ca=certs / pki.CA_CERT, worker_cert=worker_cert, worker_key=worker_key, instance=INSTANCE,
            compilers=COMPILERS, keepalive_s=20, poll_s=TEST_POLL_S, run_as=runner.name if runner else None,
            sandbox_dir=reachable / "sandboxes", worker_args=("--max-procs", "256", "--cpu-time", "120"),
        )
        stack.callback(manager.destroy, base / "state")
        stack.callback(_stop_proxies, proxy_dir)  # runs first: the proxies go before their server
        yield MtlsCluster(manager.start(spec), certs, proxy_dir)


def _run(mtls: MtlsCluster, program: ThinProgram, module: str, salt: str, *flags: str,
         thin: bool = False, env: Mapping[str, str] | None = None) -> WrapperRun:
    """A backend as ninja runs it: `goma-ext run` (or, thin, the thin client under `python -S`) in the build dir."""
    launcher = [sys.executable, "-S", str(THIN_CLIENT)] if thin else [sys.executable, "-m", "goma_ext.cli", "run"]
    cmd = [*launcher, "--remote", mtls.endpoint, "--exec-root", "..", *flags, "--", *program.backend(module)]
    proc = subprocess.run(cmd, cwd=program.out, capture_output=True, text=True, timeout=180,
                          env=dict(env or mtls.env(salt)))
    return WrapperRun(proc.returncode, proc.stdout, proc.stderr)


def _warnings(run: WrapperRun) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith(WARNING_PREFIX)]


def test_the_cluster_requires_client_certificates_and_its_probe_presents_the_workers(mtls: MtlsCluster) -> None:
    st = mtls.st
    config = (Path(st.state) / "buildgrid.yml").read_text()
    # every TCP channel requires a client certificate; the one plaintext channel is the host's workers' private
    # Unix socket (a 0700 directory: no client reaches it)
    assert f"tls-client-certs: {mtls.certs / pki.CA_CERT}" in config
    assert config.count("insecure-mode: true") == 1 and f"address: unix:{st.worker_socket}" in config
    workers = Path(f"/proc/{st.worker_pid}/cmdline").read_bytes().split(b"\0")
    assert workers[workers.index(b"--remote") + 1].decode() == f"grpc://unix:{st.worker_socket}"
    assert json.loads((Path(st.state) / manager.STATE_FILE).read_text())["worker_cert"] == st.worker_cert
    info = manager.status(Path(st.state))  # the probe presents the workers' certificate
    assert str(info["capabilities"]).startswith("ok"), info
    policy = retry.RetryPolicy(1, timeout_s=10.0)
    with open_channel(mtls.config("alice")) as ch:
        capabilities.fetch(ch, INSTANCE, mtls.config("alice").metadata(), policy)
    other = mtls.certs.parent / "other-ca"  # a certificate from another CA is refused like none at all
    pki.make(other, [], ["mallory"])
    mallory = pki.client_files(other, "mallory")
    for cfg in (mtls.config(None), replace(mtls.config("alice"), client_cert=mallory[0], client_key=mallory[1])):
        with pytest.raises(RemoteError) as e, open_channel(cfg) as ch:
            capabilities.fetch(ch, INSTANCE, cfg.metadata(), policy)
        assert e.value.code == "UNAVAILABLE", e.value


@pytest.mark.parametrize("proxy", [False, True], ids=["in-process", "proxy"])
def test_without_a_client_certificate_one_line_names_the_handshake_and_the_backend_runs_locally(
    mtls: MtlsCluster, program: ThinProgram, ref: dict[str, bytes], salt: str, proxy: bool
) -> None:
    run = _run(mtls, program, "delta", salt, *mtls.flags(None), *([] if proxy else ["--no-proxy"]))
    assert run.returncode == 0, run.stderr
    lines = _warnings(run)
    assert len(lines) == 1 and "TLS handshake failed" in lines[0] and "client_cert" in lines[0], run.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.FALLBACK]
    assert program.native("delta").read_bytes() == ref["delta"]


def test_with_a_client_certificate_the_backend_runs_remotely(
    mtls: MtlsCluster, program: ThinProgram, ref: dict[str, bytes], salt: str
) -> None:
    run = _run(mtls, program, "delta", salt, *mtls.flags("alice"), "--no-proxy")
    assert run.returncode == 0 and not _warnings(run), run.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE]  # a worker executed it: it is registered
    assert program.native("delta").read_bytes() == ref["delta"]


def test_through_the_proxy_with_a_client_certificate_and_never_shared_with_a_client_without(
    mtls: MtlsCluster, program: ThinProgram, ref: dict[str, bytes], salt: str, own_proxy_dir: Path
) -> None:
    env = mtls.env(salt, own_proxy_dir)
    first = _run(mtls, program, "delta", salt, *mtls.flags("alice"), env=env)  # the full client starts the proxy
    assert first.returncode == 0 and not _warnings(first), first.stderr
    cert, key = pki.client_files(mtls.certs, "alice")
    by_env = {**env, "GOMA_EXT_REMOTE_CLIENT_CERT": str(cert), "GOMA_EXT_REMOTE_CLIENT_KEY": str(key)}
    flags = ["--ca-file", str(mtls.certs / pki.CA_CERT), "--token-file", str(mtls.token_file)]
    second = _run(mtls, program, "gamma", salt, *flags, thin=True, env=by_env)  # the thin client's fast path
    assert second.returncode == 0 and not _warnings(second), second.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE, stats.Mode.REMOTE]
    assert program.native("delta").read_bytes() == ref["delta"]
    assert program.native("gamma").read_bytes() == ref["gamma"]
    status = subprocess.run([sys.executable, "-m", "goma_ext.cli", "proxy", "status", "--json"], capture_output=True,
                            text=True, check=True, env=env).stdout
    assert len(json.loads(status)) == 1, status  # one proxy served both: flags and environment name the same one
    without = _run(mtls, program, "beta", salt, *mtls.flags(None), thin=True, env=env)  # another key: another proxy
    assert without.returncode == 0 and len(_warnings(without)) == 1, without.stderr
    assert "TLS handshake failed" in _warnings(without)[0]
    assert records(program)[-1].mode == stats.Mode.FALLBACK


def test_dtlto_jobs_present_the_client_certificate_from_the_environment(
    mtls: MtlsCluster, tmp_path: Path, salt: str, own_proxy_dir: Path
) -> None:
    """A clang-22 DTLTO link: the distributor takes the certificate from GOMA_EXT_REMOTE_CLIENT_CERT/_KEY and hands
    it to the proxy it starts; without it, every job compiles locally and the binary is the same."""
    local, remote, refused = (dtlto_program.build(tmp_path / d) for d in ("local", "remote", "refused"))
    inputs = dtlto_program.OBJECTS_ONLY
    assert dtlto_program.link(local, dist=("--no-cache",), inputs=inputs).returncode == 0
    cert, key = pki.client_files(mtls.certs, "alice")
    env = {**mtls.env(salt, own_proxy_dir), "GOMA_EXT_REMOTE_CA_FILE": str(mtls.certs / pki.CA_CERT),
           "GOMA_EXT_REMOTE_TOKEN_FILE": str(mtls.token_file)}
    dist = ("--no-cache", f"--remote={mtls.endpoint}", f"--instance={INSTANCE}")
    done = dtlto_program.link(remote, dist=dist, inputs=inputs, env={
        **env, "GOMA_EXT_REMOTE_CLIENT_CERT": str(cert), "GOMA_EXT_REMOTE_CLIENT_KEY": str(key)})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [r.mode for r in dtlto_program.records(remote)] == [stats.Mode.REMOTE] * 3
    done = dtlto_program.link(refused, dist=dist, inputs=inputs, env=env)
    assert done.returncode == 0 and "TLS handshake failed" in done.stderr, done.stderr
    assert {r.mode for r in dtlto_program.records(refused)} == {stats.Mode.FALLBACK}
    for d in (remote, refused):
        assert (d / "app").read_bytes() == (local / "app").read_bytes()
