"""The worker's file cache publishes only verified, read-only files, evicts the least recently used, survives a
restart and concurrent writers, and materialise() links (or, for a non-root worker, copies) inputs from it."""

from __future__ import annotations

import errno
import fcntl
import multiprocessing
import os
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.proto import re_pb2
from goma_ext.worker import exec_root, filecache
from goma_ext.worker.errors import Refusal
from goma_ext.worker.filecache import LOCKS, TMP, FileCache, FileCacheError
from goma_ext.worker.forklock import FORK_LOCK
from goma_ext.worker.inputtree import Deadline
from goma_ext.worker.lease import hand_over
from goma_ext.worker.sandbox import Isolation, IsolationMode, Limits, RunAs


def _blob(n: int, fill: bytes = b"x") -> tuple[Digest, bytes]:
    data = (fill * n)[:n]
    return Digest.of_bytes(data), data


def _published(cache: FileCache) -> list[Path]:
    return sorted(p for kind in ("f", "x") for p in (cache.root / kind).rglob("*") if p.is_file())


def test_a_published_file_is_verified_read_only_and_kept_apart_by_mode(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    d, data = _blob(1000)
    plain, exe = cache.put(d, False, data), cache.put(d, True, data)
    assert plain is not None and exe is not None and plain != exe
    assert plain.read_bytes() == data and Digest.of_file(exe) == d
    assert stat.S_IMODE(plain.stat().st_mode) == 0o444 and stat.S_IMODE(exe.stat().st_mode) == 0o555
    assert plain.stat().st_uid == os.geteuid() and plain.stat().st_ino != exe.stat().st_ino
    assert cache.get(d, False) == plain and cache.get(_blob(5)[0], False) is None
    assert stat.S_IMODE(cache.root.stat().st_mode) == 0o700  # the runner uid cannot reach or write it
    assert list((cache.root / TMP).iterdir()) == [] and cache.total_bytes == 2000


def test_a_corrupted_blob_is_never_published(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    d, _ = _blob(100)
    with pytest.raises(FileCacheError, match="not cached"):
        cache.put(d, False, b"y" * 100)
    assert cache.get(d, False) is None and _published(cache) == [] and list((cache.root / TMP).iterdir()) == []


def test_publishing_twice_keeps_the_first_file(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    d, data = _blob(100)
    first = cache.put(d, False, data)
    ino = first.stat().st_ino if first else 0
    assert cache.put(d, False, data) == first and first is not None and first.stat().st_ino == ino
    assert cache.total_bytes == 100


def test_eviction_drops_the_least_recently_used_and_spares_linked_copies(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c", max_bytes=3000)
    blobs = [_blob(1000, bytes([65 + i])) for i in range(3)]
    paths = [cache.put(d, False, data) or tmp_path for d, data in blobs]
    for i, p in enumerate(paths):
        os.utime(p, (1000 + i, 1000 + i))  # ages: 0 oldest
    os.link(paths[0], tmp_path / "in-a-sandbox")  # blob 0 is in use by an action
    assert cache.get(blobs[0][0], False) is not None  # ... and was just used: now the newest
    d, data = _blob(1000, b"D")
    assert cache.put(d, False, data) is not None  # 4000 > 3000: evict down to 2700
    left = {p.name.split("-")[0] for p in _published(cache)}
    assert left == {blobs[0][0].hash, d.hash}  # 1 and 2 went, oldest first
    assert cache.total_bytes == 2000
    assert (tmp_path / "in-a-sandbox").read_bytes() == blobs[0][1]


def test_a_blob_larger_than_the_bound_is_not_cached(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c", max_bytes=1000)
    d, data = _blob(2000)
    assert cache.put(d, False, data) is None and _published(cache) == []


def test_a_restart_rebuilds_the_index_and_drops_temps_and_bad_files(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    d, data = _blob(500)
    p = cache.put(d, True, data)
    assert p is not None
    proc = subprocess.Popen(["true"])
    proc.wait()
    (cache.root / TMP / f"{proc.pid}-stale").write_bytes(b"partial")  # a killed writer's
    (cache.root / TMP / f"{os.getppid()}-live").write_bytes(b"writing")  # a live process's: kept
    bad = p.parent / f"{'0' * 64}-7"
    bad.write_bytes(b"short")  # wrong size for its name: a crash or tampering, never trusted
    os.chmod(bad, 0o444)
    again = FileCache(tmp_path / "c")
    assert again.total_bytes == 500 and again.get(d, True) == p and not bad.exists()
    assert sorted(x.name for x in (cache.root / TMP).iterdir()) == [f"{os.getppid()}-live"]


def test_threads_publishing_the_same_blobs_agree(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    blobs = [_blob(10_000 + i) for i in range(20)]
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for d, data in blobs:
                p = cache.put(d, False, data)
                assert p is not None and Digest.of_file(p) == d
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(_published(cache)) == 20
    assert cache.total_bytes == sum(d.size for d, _ in blobs)
    assert list((cache.root / TMP).iterdir()) == []


def _publish_all(root: str, n: int) -> None:
    cache = FileCache(Path(root))
    for i in range(n):
        d, data = _blob(50_000 + i, b"p")
        cache.put(d, i % 2 == 1, data)


def test_processes_sharing_a_directory_agree(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_publish_all, args=(str(tmp_path / "c"), 30)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    cache = FileCache(tmp_path / "c")
    assert len(_published(cache)) == 30 and all(Digest.of_file(p).hash in p.name for p in _published(cache))


class _DictCas:
    def __init__(self, blobs: dict[Digest, bytes]) -> None:
        self.blobs = blobs
        self.reads: list[Digest] = []

    def read_many(self, ds: set[Digest]) -> dict[Digest, bytes]:
        self.reads += sorted(ds)
        return {d: self.blobs[d] for d in ds}


def _tree(files: dict[str, tuple[bytes, bool]]) -> tuple[_DictCas, Digest]:
    nodes = [re_pb2.FileNode(name=n, digest=Digest.of_bytes(b).to_proto(), is_executable=x)
             for n, (b, x) in sorted(files.items())]
    root = re_pb2.Directory(files=nodes)
    blobs = {Digest.of_bytes(b): b for b, _ in files.values()}
    blobs[Digest.of_message(root)] = serialize(root)
    return _DictCas(blobs), Digest.of_message(root)


@pytest.mark.parametrize("share", [True, False], ids=["link", "copy"])
def test_materialise_fetches_once_then_places_from_the_cache(tmp_path: Path, share: bool) -> None:
    cache = FileCache(tmp_path / "c")
    cc, hdr = b"\x7fELF" + b"c" * 100_000, b"int f(void);\n"
    cas, root = _tree({"cc": (cc, True), "a.h": (hdr, False)})
    first = exec_root.materialise(cas, root, (tmp_path / "s1"), cache, share)  # type: ignore[arg-type]
    assert (first.files, first.fetched, first.cached, first.fetched_bytes) == (2, 2, 0, len(cc) + len(hdr))
    cas.reads.clear()
    second = exec_root.materialise(cas, root, (tmp_path / "s2"), cache, share)  # type: ignore[arg-type]
    assert (second.fetched, second.cached, second.cached_bytes) == (0, 2, len(cc) + len(hdr))
    assert cas.reads == [root]  # only the Directory message: no file was downloaded
    placed = tmp_path / "s2" / "cc"
    cached = cache.get(Digest.of_bytes(cc), True)
    assert placed.read_bytes() == cc and os.access(placed, os.X_OK) and cached is not None
    assert (placed.stat().st_ino == cached.stat().st_ino) is share
    assert stat.S_IMODE(placed.stat().st_mode) == (0o555 if share else 0o755)


def test_materialise_survives_a_cache_too_small_for_its_inputs(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c", max_bytes=1500)
    files = {f"f{i}": (bytes([65 + i]) * 1000, False) for i in range(3)}
    cas, root = _tree(files)
    placed = exec_root.materialise(cas, root, tmp_path / "s", cache, True)  # type: ignore[arg-type]
    assert placed.fetched == 3
    assert {n: (tmp_path / "s" / n).read_bytes() for n in files} == {n: b for n, (b, _) in files.items()}


class _SlowCas(_DictCas):
    """A CAS whose reads take a while, as a toolchain's hundreds of MB do: what workers starting at once overlap."""

    def read_many(self, ds: set[Digest]) -> dict[Digest, bytes]:
        time.sleep(0.3)
        return super().read_many(ds)


def test_workers_starting_at_once_fetch_a_large_input_once(tmp_path: Path) -> None:
    """Four leases (threads here; processes claim the same way, by flock on the cache's lock file) materialise one
    tree at the same moment: its large file is read from the CAS once, the others wait for it and place it from the
    cache; its small file is fetched by each (not claimed)."""
    cache = FileCache(tmp_path / "c")
    big, small = b"\x7fELF" + b"b" * exec_root.CLAIM_MIN_BYTES, b"int f(void);\n"
    cas, root = _tree({"cc": (big, True), "a.h": (small, False)})
    cas.__class__ = _SlowCas
    start = threading.Barrier(4)
    placed: dict[int, exec_root.Materialised] = {}

    def lease(i: int) -> None:
        start.wait()
        placed[i] = exec_root.materialise(cas, root, tmp_path / f"s{i}", cache, True)  # type: ignore[arg-type]

    threads = [threading.Thread(target=lease, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cas.reads.count(Digest.of_bytes(big)) == 1 and cas.reads.count(Digest.of_bytes(small)) == 4
    assert sorted((m.fetched, m.cached) for m in placed.values()) == [(1, 1), (1, 1), (1, 1), (2, 0)]
    assert all((tmp_path / f"s{i}" / "cc").read_bytes() == big for i in range(4))


def test_a_lease_waiting_for_another_fetch_keeps_its_deadline(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    big = b"b" * exec_root.CLAIM_MIN_BYTES
    cas, root = _tree({"big": (big, False)})
    with cache.claim(Digest.of_bytes(big), lambda: None):  # another worker's fetch that does not end
        with pytest.raises(RemoteError, match="timeout passed while waiting for another fetch") as e:
            exec_root.materialise(cas, root, tmp_path / "s", cache, True,  # type: ignore[arg-type]
                                  deadline=Deadline(time.monotonic() + 0.3))
    assert e.value.code == "DEADLINE_EXCEEDED" and Digest.of_bytes(big) not in cas.reads
    placed = exec_root.materialise(cas, root, tmp_path / "s2", cache, True)  # type: ignore[arg-type]
    assert placed.fetched == 1  # released: the next lease fetches it


@pytest.mark.parametrize("size", [5, exec_root.CLAIM_MIN_BYTES], ids=["small", "claimed"])
def test_a_digest_that_would_be_a_path_is_refused_before_the_cache_sees_it(tmp_path: Path, size: int) -> None:
    """The cache names its files (and lock files) after digests: a client's input tree whose file digest holds
    "../" must not make the worker touch (utime, create) a path outside the cache, as root."""
    cache = FileCache(tmp_path / "a" / "c")
    bad = "../../victim"  # a/c/f/<hash[:2]>/<hash>-<size> is tmp_path/victim-SIZE; a/c/locks/<hash>-<size>, a/victim-SIZE
    victim = tmp_path / f"victim-{size}"
    victim.write_text("x")
    os.utime(victim, (1, 1))
    root = re_pb2.Directory(files=[re_pb2.FileNode(name="cc", digest=re_pb2.Digest(hash=bad, size_bytes=size))])
    cas = _DictCas({Digest.of_message(root): serialize(root)})
    with pytest.raises(Refusal, match="input 'cc' has a malformed digest"):
        exec_root.materialise(cas, Digest.of_message(root), tmp_path / "s", cache, True)  # type: ignore[arg-type]
    assert victim.stat().st_mtime == 1 and not (tmp_path / "a" / f"victim-{size}").exists()
    with pytest.raises(FileCacheError, match="malformed digest"):
        cache.get(Digest(bad, size), False)


def test_a_malformed_directory_digest_is_refused(tmp_path: Path) -> None:
    child = re_pb2.DirectoryNode(name="d", digest=re_pb2.Digest(hash="../" + "0" * 61, size_bytes=2))
    root = re_pb2.Directory(directories=[child])
    cas = _DictCas({Digest.of_message(root): serialize(root)})
    with pytest.raises(Refusal, match="input directory 'd' has a malformed digest"):
        exec_root.materialise(cas, Digest.of_message(root), tmp_path / "s")  # type: ignore[arg-type]


def test_claims_leave_no_lock_files_and_a_new_cache_drops_those_no_one_holds(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    big = b"b" * exec_root.CLAIM_MIN_BYTES
    cas, root = _tree({"big": (big, False)})
    exec_root.materialise(cas, root, tmp_path / "s", cache, True)  # type: ignore[arg-type]
    assert list((cache.root / LOCKS).iterdir()) == []  # its holder removed it
    stale, live = cache.root / LOCKS / f"{'a' * 64}-1", cache.root / LOCKS / f"{'b' * 64}-1"
    stale.touch()  # a holder killed before removing it
    with open(live, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # a fetch in progress in another process
        FileCache(tmp_path / "c")
        assert sorted((cache.root / LOCKS).iterdir()) == [live]


def test_a_claim_waits_a_minute_at_most_then_fetches_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A holder stuck on a slow CAS must not fail every lease waiting for it: past CLAIM_PATIENCE_S the waiter
    fetches the blob itself."""
    monkeypatch.setattr(filecache, "CLAIM_PATIENCE_S", 0.3)
    cache = FileCache(tmp_path / "c")
    big = b"b" * exec_root.CLAIM_MIN_BYTES
    cas, root = _tree({"big": (big, False)})
    with cache.claim(Digest.of_bytes(big), lambda: None):  # another worker's fetch that does not end
        placed = exec_root.materialise(cas, root, tmp_path / "s", cache, True)  # type: ignore[arg-type]
    assert placed.fetched == 1 and (tmp_path / "s" / "big").read_bytes() == big


def test_a_blob_the_cache_cannot_keep_is_not_claimed(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c", max_bytes=exec_root.CLAIM_MIN_BYTES)  # keeps blobs up to 0.9 of that
    big = b"b" * exec_root.CLAIM_MIN_BYTES
    cas, root = _tree({"big": (big, False)})
    with cache.claim(Digest.of_bytes(big), lambda: None):  # it would wait here if it claimed it
        placed = exec_root.materialise(cas, root, tmp_path / "s", cache, True,  # type: ignore[arg-type]
                                       deadline=Deadline(time.monotonic() + 5))
    assert placed.fetched == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="handing the input root to a runner uid needs root")
def testhand_over_gives_the_runner_directories_never_files(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "c")
    cas, root = _tree({"cc": (b"binary", True)})
    box = tmp_path / "root"
    exec_root.materialise(cas, root, box, cache, True)  # type: ignore[arg-type]
    (box / "sub").mkdir()
    hand_over(box, Isolation(IsolationMode.BWRAP, Limits(), RunAs("nobody", 65534, 65534)))
    assert box.stat().st_uid == 65534 and (box / "sub").stat().st_uid == 65534
    assert (box / "cc").stat().st_uid == 0 and stat.S_IMODE((box / "cc").stat().st_mode) == 0o555
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
                            "echo x >> cc; chmod 777 cc; rm cc && echo new > cc && cat cc"],
                           cwd=box, capture_output=True, text=True)
    assert "Permission denied" in probe.stderr and "Operation not permitted" in probe.stderr
    assert probe.stdout == "new\n"  # replacing an input by a new file in its directory works
    cached = cache.get(Digest.of_bytes(b"binary"), True)
    assert cached is not None and cached.read_bytes() == b"binary" and stat.S_IMODE(cached.stat().st_mode) == 0o555


def test_executables_published_while_other_threads_fork_run_without_etxtbsy(tmp_path: Path) -> None:
    """ETXTBSY hammer: one thread publishes scripts and runs each at once while others fork and exec constantly.
    A child forked mid-write inherits the writer's fd until it execs (O_CLOEXEC); without the fork lock about a
    third of these execs failed with "Text file busy" (measured: 98 of 300)."""
    cache = FileCache(tmp_path / "c")
    stop = threading.Event()
    busy: list[int] = []

    def forker() -> None:
        while not stop.is_set():
            with FORK_LOCK:  # as sandbox.run forks
                child = subprocess.Popen(["true"])
            child.wait()

    forkers = [threading.Thread(target=forker) for _ in range(4)]
    for t in forkers:
        t.start()
    try:
        for i in range(300):
            data = f"#!/bin/sh\nexit {i % 7}\n".encode() + b"#" * (i * 37)
            d = Digest.of_bytes(data)
            p = cache.put(d, True, data)
            assert p is not None
            try:
                assert subprocess.run([str(p)], check=False).returncode == i % 7
            except OSError as e:
                if e.errno != errno.ETXTBSY:
                    raise
                busy.append(i)
    finally:
        stop.set()
        for t in forkers:
            t.join()
    assert busy == []


def test_resolving_costly_input_links_stops_at_the_deadline(tmp_path: Path) -> None:
    """[harden] A client's tree of links whose targets climb `x/..` hundreds of times through a chain of 40 links
    costs the worker ~10,000 steps a link, and a few hundred thousand such links fit the node bound: hours of
    worker time. Checking them stops at the action's deadline, as creating and fetching the tree does."""
    import time

    from goma_ext.reapi.errors import RemoteError
    from goma_ext.worker.inputtree import Deadline
    from tests import input_trees

    hops = 39  # with the link that leads into the chain: 40 hops, the most the kernel follows
    links: dict[str, object] = {f"l{i}": ("link", "x/../" * 250 + f"l{i + 1}") for i in range(hops - 1)}
    links[f"l{hops - 1}"] = ("link", "x")
    links["x"] = {}
    tree = {**links, **{f"d{k}": {f"m{j}": ("link", "../l0") for j in range(20)} for k in range(20)}}
    blobs: dict[Digest, bytes] = {}
    root = input_trees.build(tree, blobs.__setitem__)
    cas = _DictCas(blobs)
    began = time.monotonic()
    with pytest.raises(RemoteError, match="timeout passed while") as e:  # (under load: maybe while creating it)
        exec_root.materialise(cas, root, tmp_path / "s", deadline=Deadline(time.monotonic() + 0.3))  # type: ignore[arg-type]
    assert e.value.code == "DEADLINE_EXCEEDED" and time.monotonic() - began < 5
