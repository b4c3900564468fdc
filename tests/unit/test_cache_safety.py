"""[trust] No planted file subverts the backend cache or the build steps: links, FIFOs and devices where an
entry, a blob, a directory, a lock or a log belongs are refused (never followed, never blocked on, never read
unbounded); verify and prune never leave the cache; stale temporary files are swept; entries count only from
trusted writers.

The tests that hand a file to another uid (chown) need root, as CI and the fresh-machine check run.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gn_thinlto.cli import cache as cache_cli
from gn_thinlto.steps.backend_log import CacheEvent, record
from tests.bounded import returns_within
from thinlto_base.fsutil import sweep_temporaries, write_if_changed
from thinlto_base.policy import CachePolicy
from thinlto_base.prune import STALE_TMP_S, prune, prune_if_due
from thinlto_base.safefs import Refused, read_regular
from thinlto_base.store import CacheStore, fetch_outputs, store_outputs
from thinlto_base.trust import Trust

KEY = "ab" + "1" * 62
DATA = b"native object"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root (CI runs as root)")
OTHER_UID = 54321  # no such user needed: ownership is a number
STEPS = ("a", "b", "c", "d", "e", "f")


def _stored(tmp_path: Path, **kw: object) -> CacheStore:
    store = CacheStore(tmp_path / "cache", **kw)  # type: ignore[arg-type]
    store.store(KEY, {"o": DATA})
    return store


def _blob(store: CacheStore, data: bytes = DATA) -> Path:
    return Path(store.blob_path(hashlib.sha256(data).hexdigest(), len(data)))


def _fetch_with_timeout(store: CacheStore, dest: Path, seconds: float = 10) -> bool:
    """fetch_outputs in a thread: a reader that blocks (on a FIFO) fails the test instead of hanging it."""
    return returns_within(lambda: fetch_outputs(store, KEY, {"o": str(dest)}), seconds)


def test_entries_are_written_0644_and_name_their_key(tmp_path: Path) -> None:
    old = os.umask(0o000)
    try:
        store = _stored(tmp_path)
    finally:
        os.umask(old)
    entry = Path(store.entry_path(KEY))
    assert entry.stat().st_mode & 0o777 == 0o644
    assert entry.read_text().splitlines()[0] == f"gn-thinlto-cache-entry-v2 {KEY}"


@pytest.mark.parametrize("plant", ["entry-fifo", "entry-dev-zero", "entry-link", "blob-fifo", "blob-dev-zero",
                                   "blob-link", "ac-fan-link", "cas-fan-link"])
def test_planted_files_are_misses_never_followed_or_blocked_on(
    tmp_path: Path, plant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _stored(tmp_path)
    entry, blob = Path(store.entry_path(KEY)), _blob(store)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / entry.name).write_bytes(entry.read_bytes())
    (outside / blob.name).write_bytes(DATA)
    target = {"entry": entry, "blob": blob}.get(plant.split("-")[0])
    if target is not None:
        target.unlink()
        if plant.endswith("fifo"):
            os.mkfifo(target)
        else:
            target.symlink_to("/dev/zero" if plant.endswith("dev-zero") else outside / target.name)
    else:
        fan = entry.parent if plant.startswith("ac") else blob.parent
        os.rename(fan, outside / "moved")
        fan.symlink_to(outside)
    assert not _fetch_with_timeout(store, tmp_path / "out.o")
    assert not (tmp_path / "out.o").exists()
    err = capsys.readouterr().err.splitlines()
    assert len(err) <= 1 and all("backend cache" in line for line in err)
    assert sorted(p.name for p in outside.iterdir() if p.is_file()) == sorted([entry.name, blob.name])


def test_a_store_through_a_planted_directory_link_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = CacheStore(tmp_path / "cache", warn_dir=str(tmp_path))
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "cache" / "ac").mkdir(parents=True)
    (tmp_path / "cache" / "ac" / KEY[:2]).symlink_to(victim)
    store_outputs(store, KEY, {"o": DATA})
    assert list(victim.iterdir()) == []
    assert "refused" in capsys.readouterr().err


def test_planted_lock_and_prune_stamp_links_create_nothing(tmp_path: Path) -> None:
    store = _stored(tmp_path)
    root = Path(store.root)
    (root / "locks").mkdir()
    for name in ("locks/" + KEY[:3], ".prune.lock", ".last-prune"):
        (root / name).symlink_to(tmp_path / f"created-{name.replace('/', '-')}")
    with store.miss_lock(KEY) as locked:
        assert not locked
    assert prune_if_due(store.root, "prune_interval=0s") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]


def test_a_miss_lock_held_by_anyone_who_can_read_the_cache_is_waited_for_a_bounded_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flock needs only a read-only open: whoever can read the cache can hold a miss lock. A miss waits for it as
    long as a backend may compile (MISS_LOCK_PATIENCE_S), then compiles without it, and the process waits for no
    miss lock again (holding every lock file would otherwise cost each miss the patience); a free lock is taken."""
    import fcntl

    from thinlto_base import store as store_mod

    store = _stored(tmp_path)
    with store.miss_lock(KEY):  # makes the lock file
        pass
    lock = next((Path(store.root) / "locks").iterdir())
    monkeypatch.setattr(store_mod, "MISS_LOCK_PATIENCE_S", 0.3)
    monkeypatch.setattr(store_mod._MissLock, "gave_up", False)
    with open(lock, "rb") as holder:  # another process's open, read-only
        fcntl.flock(holder, fcntl.LOCK_EX)
        with store.miss_lock(KEY) as locked:
            assert not locked
        t = time.monotonic()  # after one wait in vain, the process waits for no miss lock again
        with store.miss_lock(KEY) as locked:
            assert not locked and time.monotonic() - t < 0.2
        fcntl.flock(holder, fcntl.LOCK_UN)
        with store.miss_lock(KEY) as locked:  # a free lock is still taken
            assert locked


def test_a_prune_lock_held_by_anyone_who_can_read_the_cache_stops_pruning_for_a_bounded_time(tmp_path: Path) -> None:
    """The prune lock, like a miss lock, is an flock anyone who can read the cache can hold. While the last prune
    is recent, a held lock means another prune runs and none starts; once the last prune is older than the interval
    and PRUNE_LOCK_PATIENCE_S, the holder is no prune, and the cache is pruned without the lock."""
    import fcntl

    from thinlto_base.prune import LOCK, PRUNE_LOCK_PATIENCE_S, STAMP

    store = _stored(tmp_path)
    root = Path(store.root)
    policy = "prune_interval=1h:prune_after=0s:cache_size_files=0:cache_size_bytes=1"
    (root / LOCK).touch()
    with open(root / LOCK, "rb") as holder:  # another process's open, read-only
        fcntl.flock(holder, fcntl.LOCK_EX)
        (root / STAMP).touch()
        os.utime(root / STAMP, (time.time() - 3600 - PRUNE_LOCK_PATIENCE_S + 60,) * 2)  # due, held not too long
        assert prune_if_due(store.root, policy) is None and store.read_verified(KEY, ("o",)) is not None
        os.utime(root / STAMP, (time.time() - 3600 - PRUNE_LOCK_PATIENCE_S - 60,) * 2)
        result = prune_if_due(store.root, policy)
        assert result is not None and result.entries_removed == 1 and store.read_verified(KEY, ("o",)) is None
        assert time.time() - (root / STAMP).stat().st_mtime < 60  # the next prune is due after the interval again
        store.store(KEY, {"o": DATA})
        (root / STAMP).unlink()  # never pruned: the lock file's age stands for the last prune's
        os.utime(root / LOCK, (time.time() - 60,) * 2)
        assert prune_if_due(store.root, policy) is None and store.read_verified(KEY, ("o",)) is not None
        os.utime(root / LOCK, (time.time() - 3600 - PRUNE_LOCK_PATIENCE_S - 60,) * 2)
        assert prune_if_due(store.root, policy) is not None and store.read_verified(KEY, ("o",)) is None


def test_verify_and_prune_never_leave_the_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _stored(tmp_path)
    outside = tmp_path / "outside"
    (outside / "zz").mkdir(parents=True)
    precious = outside / "zz" / ("f" * 64 + "-5")
    precious.write_bytes(b"keep!")
    (Path(store.root) / "cas" / "zz").symlink_to(outside / "zz")  # a fan that is a link
    (Path(store.root) / "cas" / "ab").mkdir()
    (Path(store.root) / "cas" / "ab" / ("a" * 64 + "-5")).symlink_to(precious)  # an unnamed blob that is a link
    os.mkfifo(Path(store.root) / "ac" / KEY[:2] / ("c" * 64))  # an entry that is a FIFO
    lines = cache_cli.verify(cache_cli.Target(Path(store.root), "", None))
    assert precious.read_bytes() == b"keep!" and (Path(store.root) / "cas" / "zz").is_symlink()
    assert not (Path(store.root) / "cas" / "ab" / ("a" * 64 + "-5")).is_symlink()
    assert "1 entries verify, 1 bad" in lines[0]
    prune(store.root, CachePolicy(0, 1, 0, 0, 0), now=1e12)
    assert precious.read_bytes() == b"keep!"


def test_prune_and_verify_sweep_stale_temporaries(tmp_path: Path) -> None:
    store = _stored(tmp_path)
    stale = [Path(store.root) / "cas" / KEY[:2] / ".x.1.tmp", Path(store.root) / "ac" / KEY[:2] / ".y.2.tmp"]
    fresh = Path(store.root) / "ac" / KEY[:2] / ".z.3.tmp"
    for p in (*stale, fresh):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"partial")
    for p in stale:
        os.utime(p, (1, 1))
    result = prune(store.root, CachePolicy(0, 0, 0, 0, 0))
    assert result.tmp_removed == 2 and not any(p.exists() for p in stale) and fresh.exists()
    assert STALE_TMP_S >= 600


def test_build_dir_temporaries_are_swept_by_the_next_step(tmp_path: Path) -> None:
    out = tmp_path / "obj" / "main.o"
    out.parent.mkdir()
    gone = _dead_pid()
    left = [out.parent / f".main.o.{gone}.tmp", out.parent / f".main.o.{gone}.tmp.dwo.tmp"]
    other = out.parent / ".lib.o.9.tmp"
    live = out.parent / f".main.o.{os.getpid()}.1a2b.tmp"  # a writer still at work (an orphaned step)
    for p in (*left, other, live):
        p.write_bytes(b"x" * 100)
    sweep_temporaries(out)
    assert not any(p.exists() for p in left) and other.exists() and live.exists()


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_write_if_changed_replaces_a_planted_link_never_its_target(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (tmp_path / "out.o").symlink_to(victim)
    write_if_changed(tmp_path / "out.o", b"new")
    assert victim.read_bytes() == b"precious" and (tmp_path / "out.o").read_bytes() == b"new"
    assert not (tmp_path / "out.o").is_symlink()


def test_the_backend_log_is_not_written_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    (tmp_path / "backend.log").symlink_to(victim)
    with pytest.raises(Refused):
        record(tmp_path / "backend.log", CacheEvent.HIT, KEY, "o")
    assert victim.read_bytes() == b""


def test_reads_are_capped(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 5000)
    with pytest.raises(Refused, match="larger than"):
        read_regular(str(tmp_path / "big"), cap=4096)


def test_an_entry_moved_under_another_key_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _stored(tmp_path)
    other = "ab" + "2" * 62
    os.link(store.entry_path(KEY), store.entry_path(other))
    assert not fetch_outputs(store, other, {"o": str(tmp_path / "o")})
    assert "names another key" in capsys.readouterr().err


@root_only
def test_an_entry_of_an_untrusted_writer_is_a_miss_warned_once_per_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _stored(tmp_path, warn_dir=str(tmp_path))
    os.chown(store.entry_path(KEY), OTHER_UID, OTHER_UID)
    for _ in range(3):
        assert not fetch_outputs(store, KEY, {"o": str(tmp_path / "o")})
    fresh = CacheStore(store.root, warn_dir=str(tmp_path))  # another backend step of the same build
    assert not fetch_outputs(fresh, KEY, {"o": str(tmp_path / "o")})
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"uid {OTHER_UID}" in err[0] and "not a writer this build trusts" in err[0]
    assert Path(store.entry_path(KEY)).exists()  # kept: it may be its writer's own
    assert fetch_outputs(CacheStore(store.root, Trust([str(OTHER_UID)])), KEY, {"o": str(tmp_path / "o")})


@root_only
def test_an_entry_others_could_change_is_a_miss(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = _stored(tmp_path)
    os.chmod(store.entry_path(KEY), 0o664)
    assert not fetch_outputs(store, KEY, {"o": str(tmp_path / "o")})
    assert "writable by group or others" in capsys.readouterr().err


@root_only
def test_verify_counts_untrusted_entries_and_keeps_them(tmp_path: Path) -> None:
    store = _stored(tmp_path)
    os.chown(store.entry_path(KEY), OTHER_UID, OTHER_UID)
    lines = cache_cli.verify(cache_cli.Target(Path(store.root), "", None))
    assert "0 entries verify" in lines[0]
    assert f"1 entries from writers your builds do not trust (1 of uid {OTHER_UID})" in lines[1]
    assert Path(store.entry_path(KEY)).exists() and _blob(store).exists()


def test_warnings_are_one_per_build_across_step_processes(tmp_path: Path) -> None:
    """Backend steps of one ninja build (children of the same ninja, started at once) warn once between them; a
    new build warns again."""
    script = (
        "import sys; from thinlto_base.notices import once_per_build; "
        "once_per_build(sys.argv[1], 'untrusted', 'c 1', 'said', set())"
    )
    step = f"{sys.executable} -c \"{script}\" {tmp_path}"
    (tmp_path / "build.ninja").write_text(
        f"rule r\n  command = {step} && touch $out\n  description = step $out\n"
        + "".join(f"build {p}: r\n" for p in STEPS))
    said = []
    for _ in range(2):
        for p in ("a", "b"):
            (tmp_path / p).unlink(missing_ok=True)
        proc = subprocess.run(["ninja", "-C", str(tmp_path)], capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        said.append((proc.stdout + proc.stderr).count("backend cache: said"))
    assert said == [1, 1]


@pytest.mark.parametrize("case", ["usage", "long-cache", "long-output"])
def test_the_backend_step_ends_bad_input_with_one_line(tmp_path: Path, case: str) -> None:
    """What the fuzzers of the other entry points found, for the backend step: no traceback, one line."""
    (tmp_path / "a.o").write_bytes(b"x")
    fake = tmp_path / "fake-clang"  # writes its -o argument
    fake.write_text('#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\necho native > "$2"\n')
    fake.chmod(0o755)
    long = "a/" * 3000
    out = f"{long}x.o" if case == "long-output" else "a.native.o"
    cache = ["--cache", long] if case == "long-cache" else ["--no-cache"]
    argv = [] if case == "usage" else [*cache, "--log", "l.log", "--", str(fake), "-c", "-x", "ir", "a.o", "-o", out]
    step = Path(__file__).resolve().parents[2] / "gn_thinlto" / "steps" / "backend.py"
    proc = subprocess.run([sys.executable, "-S", str(step), *argv], cwd=tmp_path, capture_output=True, text=True)
    lines = proc.stderr.splitlines()
    assert "Traceback" not in proc.stderr and all(line.startswith("gn-thinlto: ") and len(line) < 400 for line in lines)
    if case == "long-cache":  # a cache it cannot use: it says so (reading, storing) and compiles
        assert proc.returncode == 0 and all("warning: backend cache" in line for line in lines)
    else:
        assert proc.returncode == 2 and len(lines) == 1


@root_only
def test_an_untrusted_entry_that_prune_removes_takes_no_blob_with_it(tmp_path: Path) -> None:
    """[harden] Anyone who may write the cache can plant an old entry naming another's blobs: the next prune, by
    a user allowed to remove those blobs, took them with the planted entry, and every trusted entry naming them
    became a miss. Prune removes an untrusted entry alone."""
    from thinlto_base.policy import parse_policy

    store = _stored(tmp_path)
    planted_key = "cd" + "2" * 62
    store.store(planted_key, {"o": DATA})  # names the very blob KEY's entry names
    planted = store.entry_path(planted_key)
    os.chown(planted, OTHER_UID, OTHER_UID)
    os.utime(planted, (0, 0))  # expired under any policy
    result = prune(store.root, parse_policy("prune_after=1h"))
    assert result.entries_removed == 1 and result.blobs_removed == 0 and not Path(planted).exists()
    assert _blob(store).exists() and fetch_outputs(store, KEY, {"o": str(tmp_path / "o")})
    # an untrusted writer's own entry still goes with the blobs that writer owns (none left behind for ever)
    theirs = b"their object"
    store.store(planted_key, {"o": theirs})
    for path in (store.entry_path(planted_key), _blob(store, theirs)):
        os.chown(path, OTHER_UID, OTHER_UID)
    os.utime(store.entry_path(planted_key), (0, 0))
    result = prune(store.root, parse_policy("prune_after=1h"))
    assert (result.entries_removed, result.blobs_removed) == (1, 1) and not _blob(store, theirs).exists()
    os.utime(store.entry_path(KEY), (0, 0))  # a trusted entry that expires still takes its blob
    result = prune(store.root, parse_policy("prune_after=1h"))
    assert (result.entries_removed, result.blobs_removed) == (1, 1) and not _blob(store).exists()
