"""The edge to [remote]: start/stop the local PostgreSQL + BuildGrid cluster and read goma-ext's stats log."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from bench.fsio import REPO
from bench.measure import BenchError

WORKERS = 2
# The state directory of a running cluster to use instead of starting one: the test suite's smoke tests share
# the run's cluster (its CAS is warm and it serves other tests meanwhile, so the figures are not a cold, idle
# cluster's; the benchmarks' own cache salts keep their action-cache lookups their own).
EXISTING_ENV = "GN_THINLTO_BENCH_CLUSTER"


def existing() -> Path | None:
    """The running cluster GN_THINLTO_BENCH_CLUSTER names, if any."""
    value = os.environ.get(EXISTING_ENV)
    return Path(value) if value else None


def available() -> str | None:
    """None when the cluster and wrapper can run here, else why not (one line for the report)."""
    if importlib.util.find_spec("goma_ext.cluster.manager") is None or importlib.util.find_spec("goma_ext.remote.wrapper") is None:
        return "goma_ext.cluster / goma_ext.remote.wrapper not present ([remote] not landed)"
    if not any(Path(d, "pg_ctlcluster").exists() for d in os.environ.get("PATH", "").split(":")):
        return "PostgreSQL (pg_ctlcluster) not installed (./dev test installs it)"
    return None


def start(state: Path, workers: int = WORKERS) -> str:
    """Start (or reuse) a cluster with WORKERS workers under STATE, or take the running one GN_THINLTO_BENCH_CLUSTER
    names (its plaintext endpoint); return its endpoint. The cluster checks a JWT on every request: its client
    token goes into this process's environment, which every build, wrapper and proxy the benchmark starts inherits
    (GOMA_EXT_REMOTE_TOKEN_FILE)."""
    from goma_ext.cluster import manager, tokens

    shared = existing()
    if shared is not None:
        st = manager.load(shared)
        if st is None or st.plaintext_endpoint is None:
            raise BenchError(f"{EXISTING_ENV}={shared}: no running cluster with a plaintext endpoint there")
        endpoint = st.plaintext_endpoint
    else:
        venv = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))
        st = manager.start(manager.ClusterSpec(state=state.resolve(), workers=workers, server_venv=venv))
        endpoint = st.endpoint
    token = st.token_file(tokens.Role.CLIENT)
    if token is not None:  # None: a cluster started with --auth none
        os.environ["GOMA_EXT_REMOTE_TOKEN_FILE"] = str(token)
    return endpoint


def stop(state: Path) -> None:
    """Stop the cluster `start` started under STATE (not one GN_THINLTO_BENCH_CLUSTER names)."""
    from goma_ext.cluster import manager

    if existing() is None:
        manager.destroy(state.resolve())  # also removes PostgreSQL data kept outside STATE (the /tmp fallback)


def report(out_dir: Path) -> dict[str, Any]:
    from goma_ext.remote import stats

    return stats.report(out_dir)
