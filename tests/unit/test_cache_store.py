"""[cache] The backend cache store and its pruning, on small synthetic entries."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from thinlto_base.policy import CachePolicy, PolicyError, parse_policy
from thinlto_base.prune import prune, prune_if_due
from thinlto_base.store import CacheStore, fetch_outputs, store_outputs

KEY = "ab" + "0" * 62


def _stored(tmp_path: Path, data: bytes = b"native object", key: str = KEY) -> CacheStore:
    store = CacheStore(tmp_path / "cache")
    store.store(key, {"o": data})
    return store


def test_a_hit_serves_verified_bytes_and_refreshes_use_time(tmp_path: Path) -> None:
    store = _stored(tmp_path)
    entry = Path(store.entry_path(KEY))
    os.utime(entry, (1, 1))
    assert fetch_outputs(store, KEY, {"o": str(tmp_path / "out.o")})
    assert (tmp_path / "out.o").read_bytes() == b"native object"
    assert entry.stat().st_mtime > 1


@pytest.mark.parametrize("damage", ["flip", "truncate_blob", "truncate_entry", "garbage_entry"])
def test_damaged_entries_are_misses_removed_with_one_warning(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _stored(tmp_path, b"x" * 1000)
    blob = Path(store.blob_path(hashlib.sha256(b"x" * 1000).hexdigest(), 1000))
    entry = Path(store.entry_path(KEY))
    if damage == "flip":
        data = bytearray(blob.read_bytes())
        data[500] ^= 0x40
        blob.write_bytes(bytes(data))
    elif damage == "truncate_blob":
        blob.write_bytes(blob.read_bytes()[:10])
    elif damage == "truncate_entry":
        entry.write_bytes(entry.read_bytes()[:20])
    else:
        entry.write_bytes(b"\xff\xfe")
    assert not fetch_outputs(store, KEY, {"o": str(tmp_path / "out.o")})
    assert not entry.exists() and not (tmp_path / "out.o").exists()
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("gn-thinlto: warning: backend cache: entry abcd"[:42])
    assert "out.o" in err[0] and "removed, compiling again" in err[0]


def test_a_missing_blob_is_a_quiet_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _stored(tmp_path)
    os.unlink(store.blob_path(hashlib.sha256(b"native object").hexdigest(), len(b"native object")))
    assert not fetch_outputs(store, KEY, {"o": str(tmp_path / "out.o")})
    assert not Path(store.entry_path(KEY)).exists() and capsys.readouterr().err == ""


def test_an_unwritable_cache_warns_once_and_recovers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cache").write_text("a file where the cache directory should be")
    state = tmp_path / "state"
    store = CacheStore(tmp_path / "cache", warn_dir=str(state))
    state.mkdir()
    for n in range(3):
        store_outputs(store, f"{n:02d}" + "0" * 62, {"o": b"x"})
    assert len(capsys.readouterr().err.splitlines()) == 1 and (state / "backend-cache.unwritable").exists()
    (tmp_path / "cache").unlink()
    store_outputs(store, KEY, {"o": b"x"})
    assert fetch_outputs(store, KEY, {"o": str(tmp_path / "o")})
    (tmp_path / "cache2").write_text("unwritable again, in the same build")
    store.root = str(tmp_path / "cache2")
    store_outputs(store, KEY, {"o": b"x"})
    assert len(capsys.readouterr().err.splitlines()) == 0  # said once in this build, whatever happened between


def test_policy_syntax_is_llds() -> None:
    p = parse_policy("prune_interval=30s:prune_after=2h:cache_size=10%:cache_size_bytes=40g:cache_size_files=100000")
    assert p == CachePolicy(30, 7200, 10, 40 << 30, 100_000)
    assert parse_policy("") == CachePolicy() == CachePolicy(1200, 7 * 86400, 75, 0, 1_000_000)
    assert parse_policy("cache_size_bytes=32k:prune_after=1w").max_bytes == 32 << 10
    for bad, message in [("cache_size=101%", "cache_size='101%'"), ("foo=1", "unknown key 'foo'"),
                         ("prune_after=10", "prune_after='10'"), ("cache_size_bytes=1t", "cache_size_bytes='1t'"),
                         ("novalue", "'novalue': expected KEY=VALUE")]:
        with pytest.raises(PolicyError, match=message.replace("(", r"\(")):
            parse_policy(bad)


def _fill(tmp_path: Path, n: int, size: int = 100) -> CacheStore:
    """N entries, entry I last used at time 1000 + I."""
    store = CacheStore(tmp_path / "cache")
    for i in range(n):
        key = f"{i:064x}"
        data = i.to_bytes(4, "big") * (size // 4)
        store.store(key, {"o": data})
        os.utime(store.entry_path(key), (1000 + i, 1000 + i))
    return store


def _keys(store: CacheStore) -> list[int]:
    return sorted(int(p.name, 16) for p in Path(store.root, "ac").rglob("*") if p.is_file())


def test_prune_removes_the_least_recently_used_first(tmp_path: Path) -> None:
    store = _fill(tmp_path, 10)
    r = prune(store.root, CachePolicy(0, 0, 0, 0, max_files=8), now=2000)  # 4 entries + 4 blobs
    assert _keys(store) == [6, 7, 8, 9] and r.entries_removed == 6 and r.blobs_removed == 6


def test_prune_by_age_and_bytes(tmp_path: Path) -> None:
    store = _fill(tmp_path, 10, size=1000)
    prune(store.root, CachePolicy(0, expiration_s=1000 - 7, percent=0, max_bytes=0, max_files=0), now=2000)
    assert _keys(store) == [7, 8, 9]
    prune(store.root, CachePolicy(0, 0, 0, max_bytes=2500, max_files=0), now=2000)
    assert _keys(store) == [8, 9]


def test_prune_if_due_runs_once_per_interval(tmp_path: Path) -> None:
    store = _fill(tmp_path, 3)
    assert prune_if_due(store.root, "prune_interval=1h:prune_after=0s:cache_size_files=2") is not None
    assert _keys(store) == [2]
    _fill(tmp_path, 3)
    assert prune_if_due(store.root, "prune_interval=1h:prune_after=0s:cache_size_files=2") is None
    assert _keys(store) == [0, 1, 2]
    os.utime(Path(store.root, ".last-prune"), (time.time() - 7200,) * 2)
    assert prune_if_due(store.root, "prune_interval=1h:prune_after=0s:cache_size_files=2") is not None
