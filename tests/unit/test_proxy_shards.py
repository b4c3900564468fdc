"""[scale] Proxy shards: which shard an action goes to, how many there are, and their files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from gn_thinlto.steps.step_args import default_servers
from goma_ext.errors import GomaExtError
from goma_ext.remote import proxy_client
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig


def _argv(i: int) -> list[str]:
    return ["clang++", "-c", "-x", "ir", f"obj/m{i}.o", f"-fthinlto-index=obj/m{i}.o.thinlto.bc", "-o",
            f"obj/m{i}.native.o"]


def test_an_action_always_goes_to_the_same_shard_and_actions_spread_over_all() -> None:
    assert all(wire.shard_of(_argv(i), 4) == wire.shard_of(list(_argv(i)), 4) for i in range(50))
    spread = Counter(wire.shard_of(_argv(i), 4) for i in range(400))
    assert sorted(spread) == [0, 1, 2, 3] and min(spread.values()) > 60, spread
    assert {wire.shard_of(_argv(i), 1) for i in range(20)} == {0}


def test_shard_count_from_the_environment_else_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    assert wire.shard_count({wire.SHARDS_ENV: "3"}) == 3
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert wire.shard_count({}) == 1
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    assert wire.shard_count({}) == 2
    monkeypatch.setattr("os.cpu_count", lambda: 32)
    assert wire.shard_count({}) == 16
    monkeypatch.setattr("os.cpu_count", lambda: 64)
    assert wire.shard_count({}) == 16
    monkeypatch.setattr("os.cpu_count", lambda: 512)
    assert wire.shard_count({}) == wire.MAX_SHARDS
    assert wire.default_shards(8) == 4
    for bad in ("0", "17", "two", "-1"):
        with pytest.raises(ValueError):
            wire.shard_count({wire.SHARDS_ENV: bad})


def test_shard_zero_keeps_the_single_proxy_names_and_others_get_their_own(tmp_path: Path) -> None:
    assert wire.paths(str(tmp_path), "k")["sock"] == str(tmp_path / "proxy-k.sock")
    assert wire.paths(str(tmp_path), "k", 2)["lock"] == str(tmp_path / "proxy-k-2.lock")
    for name in ("proxy-k.sock", "proxy-k-1.sock", "proxy-k-2.sock", "proxy-other.sock", "proxy-k.log"):
        (tmp_path / name).touch()
    assert [p.name for p in proxy_client.sockets(tmp_path, "k")] == ["proxy-k-1.sock", "proxy-k-2.sock", "proxy-k.sock"]
    assert len(proxy_client.sockets(tmp_path)) == 4


def test_the_full_client_picks_the_shard_the_thin_client_picks(tmp_path: Path) -> None:
    cfg = RemoteConfig(endpoint="grpc://127.0.0.1:1")
    target = proxy_client.target_for(cfg, tmp_path, {wire.STATE_DIR_ENV: str(tmp_path), wire.SHARDS_ENV: "5"})
    assert target.shards == 5 and [t.shard for t in target.all_shards()] == [0, 1, 2, 3, 4]
    for i in range(20):
        shard = target.for_action(_argv(i))
        assert shard.files["sock"] == Path(wire.paths(str(tmp_path), target.key, wire.shard_of(_argv(i), 5))["sock"])
        assert (shard.command[-2:] == ("--shard", str(shard.shard))) == (shard.shard > 0)
    with pytest.raises(GomaExtError, match=wire.SHARDS_ENV):
        proxy_client.target_for(cfg, tmp_path, {wire.SHARDS_ENV: "99"})


def test_auto_step_servers_follow_the_machine() -> None:
    """[scale] `step_servers: auto`: one per 4 cores, 1 to 8 (at 1,000 remote cores a build directory needs 6 or
    more: docs/benchmarks.md, "The scale model with shards")."""
    assert [default_servers(n) for n in (1, 2, 4, 8, 16, 32, 64, 512)] == [1, 1, 1, 2, 4, 8, 8, 8]
