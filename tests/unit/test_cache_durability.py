"""[trust] The cache's durability policy, tested: a writer killed at random points of its stores, and the torn
files a power cut can leave (the cache does not fsync), never make a read serve wrong bytes.

The policy (README, "Sharing the cache"): blobs, then the entry, each written to a new temporary file and
renamed into place, not fsynced. A kill leaves whole files or temporary files (swept by prune once stale); a
power cut may leave a renamed file empty or cut short, which the hit's re-hash (blobs) or the entry's parse
(entries) turns into a miss, removed with one warning. So a crash costs recompiles, never a wrong object.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import budget
from thinlto_base.policy import CachePolicy
from thinlto_base.prune import prune
from thinlto_base.store import CacheStore, fetch_outputs

from .cache_writer import content, key

ROUNDS = budget.cases(60)  # writers killed: 20 in a default run, 60 with --full
KEYS = 40
SEED = 20261125
REPO = Path(__file__).resolve().parents[2]
# The writer: stores KEYS entries over and over (each output's content follows from its key), as fast as it can.
WRITER = """
import sys
from thinlto_base.store import CacheStore
from tests.unit.cache_writer import content, key
store = CacheStore(sys.argv[1])
n = int(sys.argv[2])
print("ready", flush=True)
while True:
    for i in range(n):
        store.store(key(i), {"o": content(i), "dwo": content(i)[::-1]})
"""


def _check_every_key(store: CacheStore, tmp_path: Path) -> tuple[int, int]:
    """(hits, misses) over all keys; every hit serves exactly the right bytes."""
    hits = misses = 0
    for i in range(KEYS):
        dests = {"o": str(tmp_path / "o"), "dwo": str(tmp_path / "dwo")}
        if fetch_outputs(store, key(i), dests):
            assert (tmp_path / "o").read_bytes() == content(i) and (tmp_path / "dwo").read_bytes() == content(i)[::-1]
            hits += 1
        else:
            misses += 1
    return hits, misses


def test_a_writer_killed_at_random_points_never_leaves_a_wrong_hit(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    cache = tmp_path / "cache"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for _ in range(ROUNDS):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(cache), str(KEYS)], env=env, cwd=REPO, stdout=subprocess.PIPE
        )
        # Timed from the writer's first store, not from its start: under a loaded machine the interpreter's
        # start-up alone can outlast a fixed delay, and every kill would then land before any work.
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    store = CacheStore(cache)
    hits, _ = _check_every_key(store, tmp_path)
    assert hits > 0  # the writer got somewhere, so the kills were in the middle of real work
    leftovers = list(cache.rglob(".*.tmp"))
    result = prune(str(cache), CachePolicy(0, 0, 0, 0, 0), now=time.time() + 2 * 3600)
    assert result.tmp_removed == len(leftovers) and not list(cache.rglob(".*.tmp"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_files_torn_by_a_power_cut_are_misses_never_wrong_bytes(
    tmp_path: Path, seed: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a power cut can leave without fsync: renamed files empty or cut short (any of them)."""
    rng = random.Random(seed)
    store = CacheStore(tmp_path / "cache")
    for i in range(KEYS):
        store.store(key(i), {"o": content(i), "dwo": content(i)[::-1]})
    files = sorted(p for p in (tmp_path / "cache").rglob("*") if p.is_file())
    torn = rng.sample(files, len(files) // 3)
    for p in torn:
        data = p.read_bytes()
        p.write_bytes(data[: rng.choice([0, len(data) // 2, max(len(data) - 1, 0)])])
    hits, misses = _check_every_key(store, tmp_path)
    assert misses > 0 and hits + misses == KEYS
    assert all(line.startswith("gn-thinlto: warning: backend cache: ") for line in capsys.readouterr().err.splitlines())
    assert _check_every_key(CacheStore(tmp_path / "cache"), tmp_path) == (hits, misses)  # torn entries are gone
