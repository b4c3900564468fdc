"""The edge to [remote]: start/stop the local PostgreSQL + BuildGrid cluster and read goma-ext's stats log."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from bench.fsio import REPO

WORKERS = 2


def available() -> str | None:
    """None when the cluster and wrapper can run here, else why not (one line for the report)."""
    if importlib.util.find_spec("goma_ext.cluster.manager") is None or importlib.util.find_spec("goma_ext.remote.wrapper") is None:
        return "goma_ext.cluster / goma_ext.remote.wrapper not present ([remote] not landed)"
    if not any(Path(d, "pg_ctlcluster").exists() for d in os.environ.get("PATH", "").split(":")):
        return "PostgreSQL (pg_ctlcluster) not installed (./dev test installs it)"
    return None


def start(state: Path, workers: int = WORKERS) -> str:
    """Start (or reuse) a cluster with WORKERS workers under STATE; return its endpoint. The cluster checks a JWT
    on every request: its client token goes into this process's environment, which every build, wrapper and
    proxy the benchmark starts inherits (GOMA_EXT_REMOTE_TOKEN_FILE)."""
    from goma_ext.cluster import manager, tokens

    venv = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))
    st = manager.start(manager.ClusterSpec(state=state.resolve(), workers=workers, server_venv=venv))
    token = st.token_file(tokens.Role.CLIENT)
    if token is not None:  # None: a cluster started with --auth none
        os.environ["GOMA_EXT_REMOTE_TOKEN_FILE"] = str(token)
    return st.endpoint


def stop(state: Path) -> None:
    from goma_ext.cluster import manager

    manager.destroy(state.resolve())  # also removes PostgreSQL data kept outside STATE (the /tmp fallback)


def report(out_dir: Path) -> dict[str, Any]:
    from goma_ext.remote import stats

    return stats.report(out_dir)
