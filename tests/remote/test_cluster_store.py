"""[hermetic] The server role's CAS is bounded: a `--role server` host (127.0.0.1, TLS, JWT) with a 1 MiB CAS bound
gets 2.5 MiB of blobs; its managed `bgd cleanup` deletes the least recently used ones down to the low watermark,
the newest stay, and after a server restart the index still knows exactly the survivors."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from goma_ext.cluster import manager, procs
from goma_ext.cluster.postgres import DB_NAME, DB_USER
from goma_ext.cluster.roles import Role
from goma_ext.reapi import capabilities, retry
from goma_ext.reapi.cas import Cas
from goma_ext.reapi.channel import open_channel
from goma_ext.reapi.digest import Digest
from tests.conftest import REPO
from tests.remote.conftest import TEST_POLL_S, make_cert

pytestmark = pytest.mark.slow

MAX = 1 << 20
BLOB = 64 << 10
COUNT = 40  # 2.5 MiB: well above the bound


# `bgd cleanup`'s pause between passes for this test's server (10 s in a cluster): the test waits for its passes,
# with BuildGrid, PostgreSQL and redis idling meanwhile
CLEANUP_INTERVAL_S = 2


@pytest.fixture()
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[manager.ClusterState]:
    monkeypatch.setattr(manager, "CLEANUP_INTERVAL_S", CLEANUP_INTERVAL_S)  # read when the cleanup starts
    base = Path(tempfile.mkdtemp(prefix="gxs-"))  # the postgres user reaches it when we are root
    os.chmod(base, 0o711)
    cert, key = make_cert(tmp_path)
    venv = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))
    spec = manager.ClusterSpec(state=base / "state", role=Role.SERVER, tls_cert=cert, tls_key=key, server_venv=venv,
                               cas_max_size=MAX, ac_max_memory=16 << 20, cas_access_refresh_s=1,
                               poll_s=TEST_POLL_S)
    try:
        yield manager.start(spec)
    finally:
        manager.destroy(base / "state")
        shutil.rmtree(base, ignore_errors=True)


def _present(st: manager.ClusterState, digests: list[Digest]) -> list[Digest]:
    cfg = st.client_config()
    with open_channel(cfg) as ch:
        policy = retry.RetryPolicy(3, timeout_s=10)
        cas = Cas(ch, st.instance, cfg.metadata(), capabilities.fetch(ch, st.instance, cfg.metadata(), policy), policy)
        missing = cas.find_missing(digests)
    return [d for d in digests if d not in missing]


def _on_disk(st: manager.ClusterState, digests: list[Digest]) -> list[Digest]:
    """The blobs whose file is still in the disk store (looking does not refresh access times, as a CAS call would:
    blobs used within the last two refresh intervals are never evicted)."""
    objects = Path(st.state) / "cas" / "cas" / "objects"
    return [d for d in digests if (objects / d.hash[:2] / d.hash[2:]).is_file()]


def test_the_cas_is_bounded_least_recently_used_first_and_the_index_survives_a_restart(
    server: manager.ClusterState,
) -> None:
    st = server
    assert procs.alive(st.cleanup_pid) and procs.alive(st.redis_pid)
    cfg = st.client_config()
    digests: list[Digest] = []
    with open_channel(cfg) as ch:
        policy = retry.RetryPolicy(3, timeout_s=10)
        cas = Cas(ch, st.instance, cfg.metadata(), capabilities.fetch(ch, st.instance, cfg.metadata(), policy), policy)
        for _ in range(COUNT):  # one at a time: each blob's access time is later than the one before
            digests += cas.upload_bytes([os.urandom(BLOB)])
            time.sleep(0.05)
    assert _on_disk(st, digests[-1:]) == digests[-1:]  # the disk layout looked at (the oldest may already be gone)
    deadline = time.monotonic() + 90
    # `bgd cleanup` deletes while the total is at or above the high watermark (cleanup.py: total_size >= high)
    while len(kept := _on_disk(st, digests)) * BLOB >= MAX:
        assert time.monotonic() < deadline, f"{len(kept)} of {COUNT} blobs still there; see {st.state}/logs"
        time.sleep(1)
    # the pass that went below the high watermark may still be deleting towards the low one (on a loaded machine it
    # is slower than this loop): the store has settled when two cleanup intervals, and at least 10 s (a pass's
    # batches run back to back, each slower on a loaded machine), delete nothing more
    deadline = time.monotonic() + 90
    while True:
        time.sleep(max(2 * manager.CLEANUP_INTERVAL_S, 10))
        if (now := _on_disk(st, digests)) == kept:
            break
        assert time.monotonic() < deadline, f"{len(now)} of {COUNT} blobs, still changing; see {st.state}/logs"
        kept = now
    assert kept and kept == digests[-len(kept):], "the cleanup evicted a newer blob before an older one"
    # down to about the low watermark (80 %; deleted in 20 % batches while uploads still arrive), not everything
    assert len(kept) * BLOB >= MAX * 4 // 10
    assert _present(st, digests) == kept == _on_disk(st, digests)  # the index agrees with the disk

    manager.stop(Path(st.state), Role.SERVER)
    migrations = (Path(st.state) / "logs" / "migrate.log").read_text().count("Migrating database")
    again = manager.start(manager.ClusterSpec(state=Path(st.state), role=Role.SERVER))
    assert _present(again, digests) == kept
    log = Path(st.state) / "logs" / "migrate.log"
    # the restart found its database at the revision the same scripts brought it to: no second `bgd migrate apply`
    assert log.read_text().count("Migrating database") == migrations == 1
    print(f"CAS bound {MAX} bytes: {len(kept)} of {COUNT} blobs of {BLOB} bytes kept, the newest")

    # A database lost meanwhile (dropped; `cluster start` creates it again, empty) is migrated again: BuildGrid
    # would not start on it otherwise, and start() waits for it to serve.
    manager.stop(Path(st.state), Role.SERVER)
    pg = again.postgres
    pg.start()
    pg._run("psql", "-h", "127.0.0.1", "-p", str(pg.port), "-U", DB_USER, "-d", "postgres", "-c",
            f"DROP DATABASE {DB_NAME}")
    pg.stop()
    manager.start(manager.ClusterSpec(state=Path(st.state), role=Role.SERVER))
    assert log.read_text().count("Migrating database") == 2
