"""grpcs:// against the local cluster's TLS port with a self-signed certificate made by the test session."""

from __future__ import annotations

from bench.subjects.thin_program import ThinProgram
from goma_ext.remote import stats
from goma_ext.remote.wrapper import WARNING_PREFIX
from tests.remote.conftest import Cluster, records, wrapper


def test_backend_over_tls_with_the_ca_file(cluster: Cluster, program: ThinProgram, ref: dict[str, bytes],
                                          salt: str) -> None:
    run = wrapper(program, program.backend("delta"), cluster.tls_endpoint, salt, "--ca-file", str(cluster.ca_cert))
    assert run.returncode == 0 and WARNING_PREFIX not in run.stderr, run.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE]
    assert program.native("delta").read_bytes() == ref["delta"]


def test_tls_without_the_ca_file_is_refused_and_falls_back(cluster: Cluster, program: ThinProgram, salt: str) -> None:
    run = wrapper(program, program.backend("delta"), cluster.tls_endpoint, salt)
    assert run.returncode == 0 and run.stderr.count(WARNING_PREFIX) == 1, run.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.FALLBACK]
