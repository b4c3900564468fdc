"""The workers' file cache on a real cluster: two actions carrying the same large executable input (libLLVM, as
actions carrying their compiler will) download it once and then hard-link it from the cache; an action that tries
to write, chmod or truncate that input fails, and the cache file keeps its digest. Needs root: only actions run as
another uid get hard links (a non-root worker's actions could chmod the worker's own files, so it copies)."""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from google.protobuf import struct_pb2

from goma_ext.reapi import action, execution
from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.client import RemoteExecutor
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.identity import identify
from tests.remote.conftest import INSTANCE, Cluster

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hard links from the cache need a root worker")

BIG = Path("/usr/lib/x86_64-linux-gnu/libLLVM.so.19.1")  # ~130 MB: what every action carrying clang-19 holds
PROBE_C = r"""
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
static const char *why(int r) { return r < 0 ? strerror(errno) : "done"; }
__attribute__((constructor)) static void probe(void) {
  struct stat st;
  if (stat("big", &st) == 0)
    fprintf(stderr, "probe: big uid=%u mode=%o nlink=%lu\n", st.st_uid, st.st_mode & 07777, (unsigned long)st.st_nlink);
  int fd = open("big", O_WRONLY);
  fprintf(stderr, "probe: open for writing: %s\n", why(fd));
  if (fd >= 0) { write(fd, "POISON", 6); close(fd); }
  fprintf(stderr, "probe: chmod: %s\n", why(chmod("big", 0777)));
  fprintf(stderr, "probe: truncate: %s\n", why(truncate("big", 0)));
  fprintf(stderr, "probe: cache dir: %s\n", why(access(CACHE_DIR, F_OK)));
#ifdef REPLACE
  unlink("big");
  FILE *f = fopen("big", "w");
  fprintf(stderr, "probe: replaced: %s\n", f && fputs("mine", f) >= 0 && fclose(f) == 0 ? "done" : strerror(errno));
#endif
}
"""


@dataclass(frozen=True)
class Ran:
    result: re_pb2.ActionResult
    stderr: str
    counts: dict[str, float]
    fetch_s: float


def _send(cluster: Cluster, argv: list[str], files: dict[str, tuple[Path, bool]], outputs: tuple[str, ...]) -> Ran:
    cfg = RemoteConfig(endpoint=cluster.endpoint, instance=INSTANCE, cache_salt=f"fc-{time.time_ns()}",
                       max_attempts=1, token_file=cluster.token_file)
    ex = RemoteExecutor(cfg)
    try:
        digests = {name: Digest.of_file(path) for name, (path, _) in files.items()}
        nodes = [re_pb2.FileNode(name=n, digest=digests[n].to_proto(), is_executable=x)
                 for n, (_, x) in sorted(files.items())]
        root = re_pb2.Directory(files=nodes)
        blobs = {digests[n]: BlobSource(path=p) for n, (p, _) in files.items()}
        blobs[Digest.of_message(root)] = BlobSource(data=serialize(root))
        clang = identify(argv[0], Path(tempfile.gettempdir()))
        built = action.build(action.ActionSpec(tuple(argv), "", outputs, clang.properties(), Digest.of_message(root),
                                               timeout_s=120, salt=cfg.cache_salt.encode()))
        blobs[built.command_digest] = BlobSource(data=built.command)
        blobs[built.action_digest] = BlobSource(data=built.action)
        ex.cas.upload(blobs)
        res = execution.execute(ex.channel, cfg.instance, ex.metadata, built.action_digest, ex.policy, 180).result
        stderr = ex.cas.read(Digest.from_proto(res.stderr_digest)).decode(errors="replace")
        counts: dict[str, float] = {}
        for aux in res.execution_metadata.auxiliary_metadata:
            s = struct_pb2.Struct()
            if aux.Unpack(s):
                counts.update({k.removeprefix("goma_ext."): v for k, v in s.items() if isinstance(v, float)})
        md = res.execution_metadata
        fetch_s = (md.input_fetch_completed_timestamp.ToNanoseconds() - md.input_fetch_start_timestamp.ToNanoseconds())
        return Ran(res, stderr, counts, fetch_s / 1e9)
    finally:
        ex.close()


def _probe(tmp_path: Path, cache_dir: Path, *defines: str) -> Path:
    src = tmp_path / "probe.c"
    src.write_text(PROBE_C)
    so = tmp_path / "probe.so"
    subprocess.run(["clang-19", "-shared", "-fPIC", "-O0", f'-DCACHE_DIR="{cache_dir}"', *defines, "-o", str(so),
                    str(src)], check=True, capture_output=True)
    return so


def _cached_big(cluster: Cluster) -> Path:
    d = Digest.of_file(BIG)
    path = cluster.state / "workers" / "file-cache" / "x" / d.hash[:2] / f"{d.hash}-{d.size}"
    assert path.exists(), "the workers' default file cache is WORK-DIR/file-cache"
    return path


@pytest.mark.skipif(not BIG.exists(), reason=f"needs {BIG} (Debian libllvm19)")
def test_a_large_input_is_fetched_once_then_linked_and_cannot_be_written(cluster: Cluster, tmp_path: Path) -> None:
    src = tmp_path / "a.c"
    src.write_text("int f(void) { return 1; }\n")
    stale = tmp_path / "a.o"
    stale.write_bytes(b"an input at the output's path")
    cache_dir = cluster.state / "workers" / "file-cache"
    probe = _probe(tmp_path, cache_dir)
    files = {"a.c": (src, False), "big": (BIG, True), "a.o": (stale, False), "probe.so": (probe, False)}
    argv = ["clang-19", "-fplugin=./probe.so", "-c", "a.c", "-o", "a.o"]
    runs = [_send(cluster, argv, files, ("a.o",)) for _ in range(2)]
    for r in runs:
        print(f"inputs: {r.counts}; materialise {r.fetch_s * 1000:.0f} ms\n{r.stderr}")
    first, second = runs
    big = BIG.stat().st_size
    assert second.counts["input_files_fetched"] == 0 and second.counts["input_bytes_from_cache"] >= big
    if first.counts["input_files_fetched"]:  # a cache warmed by an earlier run of this test links at once
        assert first.counts["input_bytes_fetched"] >= big
    for r in runs:
        assert r.result.exit_code == 0, r.stderr
        # root's file (the overflow uid in the sandbox's user namespace), read-only, a hard link to the cache file
        assert "probe: big uid=65534 mode=555" in r.stderr and "nlink=1\n" not in r.stderr
        assert "probe: open for writing: Permission denied" in r.stderr
        assert "probe: chmod: Operation not permitted" in r.stderr
        assert "probe: truncate: Permission denied" in r.stderr
        assert "probe: cache dir: No such file or directory" in r.stderr  # not bound into the sandbox
        assert [f.path for f in r.result.output_files] == ["a.o"]  # clang replaced the input at its output path
        assert r.result.output_files[0].digest.size_bytes != stale.stat().st_size
    cached = _cached_big(cluster)
    assert Digest.of_file(cached) == Digest.of_file(BIG) and cached.stat().st_uid == 0
    assert oct(cached.stat().st_mode & 0o7777) == "0o555"


@pytest.mark.skipif(not BIG.exists(), reason=f"needs {BIG} (Debian libllvm19)")
def test_replacing_an_input_changes_the_sandbox_only(cluster: Cluster, tmp_path: Path) -> None:
    src = tmp_path / "a.c"
    src.write_text("int f(void) { return 1; }\n")
    probe = _probe(tmp_path, cluster.state / "workers" / "file-cache", "-DREPLACE")
    files = {"a.c": (src, False), "big": (BIG, True), "probe.so": (probe, False)}
    r = _send(cluster, ["clang-19", "-fplugin=./probe.so", "-c", "a.c", "-o", "a.o"], files, ("a.o",))
    assert r.result.exit_code == 0 and "probe: replaced: done" in r.stderr, r.stderr
    assert Digest.of_file(_cached_big(cluster)) == Digest.of_file(BIG)
