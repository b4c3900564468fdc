"""[cache] Faults of the backend cache, each in real builds of the small workspace (tests/workspaces/basic: every
link shape the cache serves, an executable, tests and a shared library, in seconds): damaged, truncated and missing
entries, a full and a read-only cache file system, two builds sharing one cache concurrently, and a build
killed mid-store. After each, the binaries are correct: equal to those of a build without the cache, and
their self-checks pass; `gn-thinlto cache verify` finds nothing bad. That build without the cache is the file's only
full build: the others are copies of it with their backends forgotten (`_with_cache`), generated again with their
cache settings, so that only what the cache serves runs again: every backend and final link.

Mounting the small file systems needs root (CI and the fresh-machine check run as root).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builds import copy_build_dir, forget_backends
from tests.conftest import step_server_pids

from .test_graph_support import Build, copy_workspace, gen_and_build, gn_thinlto

pytestmark = pytest.mark.slow
BINARIES = ("app", "tool", "app_unittests", "lib_unittests", "libcomp.so")
SOME = ("app", "tool", "libcomp.so")  # what the file-system fault tests build
READELF = "/usr/lib/llvm-19/bin/llvm-readelf"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_workspace("basic", tmp_path_factory.mktemp("cache"))


def _config(root: Path, name: str, text: str) -> Path:
    path = root.parent / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def reference(root: Path) -> Build:
    """The graph without the backend cache: what every faulty build must produce."""
    config = _config(root, "nocache", "backend_cache: false\n")
    return gen_and_build(root, root.parent / "nocache", "--config", str(config))


def _with_cache(reference: Build, name: str, config: Path | None = None) -> Build:
    """REFERENCE's build directory copied beside it (as deep) to NAME, its backends forgotten (no native object, no
    backend log) and generated again with CONFIG (or the defaults: the cache on, in the build directory). Its
    compiles and thin links are the reference's, which the cache has no part in; ninja runs every backend, through
    the cache, and every final link again: the copied binaries are removed, so those it builds are the cache's work."""
    out = forget_backends(copy_build_dir(reference.out, reference.root.parent / name))
    for binary in BINARIES:
        (out / binary).unlink()
    proc = gn_thinlto("gen", str(out), "--root", str(reference.root), *(("--config", str(config)) if config else ()))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return Build(reference.root, out)


@pytest.fixture(scope="module")
def built(reference: Build) -> Build:
    b = _with_cache(reference, "out")
    b.ninja()
    return b


def _cache(b: Build) -> Path:
    return b.out / "gn-thinlto" / "cache"


def _same_as_reference(b: Build, reference: Build, binaries: tuple[str, ...] = BINARIES) -> None:
    for name in binaries:
        assert (b.out / name).read_bytes() == (reference.out / name).read_bytes(), name
        if not name.endswith(".so"):
            assert b.run_binary(name) == f"OK {name}"


def _rebuild_app(b: Build) -> subprocess.CompletedProcess[str]:
    """Remove app's natives, so that its backends run again (from the cache), and build."""
    shutil.rmtree(b.out / "gn-thinlto" / "app" / "native")
    proc = subprocess.run(["ninja", "-C", str(b.out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc


def _verify(b: Build) -> str:
    proc = gn_thinlto("cache", "verify", str(b.out))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _blobs(b: Build) -> list[Path]:
    return sorted(p for p in (_cache(b) / "cas").glob("*/*") if not p.name.startswith("."))


def _text_range(path: Path) -> tuple[int, int] | None:
    """(file offset, size) of the first non-empty code section (.text, or .text.FUNCTION under
    -ffunction-sections) of an ELF object, None if it has none."""
    out = subprocess.run([READELF, "-S", "-W", str(path)], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[1].split(".")[1:2] == ["text"] and int(parts[5], 16) > 0:
            return int(parts[4], 16), int(parts[5], 16)
    return None


def test_bit_flips_in_text_are_caught_and_the_binary_is_right(built: Build, reference: Build) -> None:
    flipped = 0
    for blob in _blobs(built):
        text = _text_range(blob)
        if text:
            data = bytearray(blob.read_bytes())
            data[text[0] + text[1] // 2] ^= 0x10
            blob.write_bytes(bytes(data))
            flipped += 1
    assert flipped >= 5
    proc = _rebuild_app(built)
    warnings = [line for line in proc.stdout.splitlines() if "warning: backend cache: entry" in line]
    assert warnings and all("does not match its digest and size; removed, compiling again" in w for w in warnings)
    _same_as_reference(built, reference)
    # the other binaries' damaged entries are found by verify, which removes them; then the cache verifies clean
    assert int(re.search(r"(\d+) bad", _verify(built)).group(1)) > 0
    assert " 0 bad and 0 without" in _verify(built)


def test_truncated_and_missing_blobs_are_misses(built: Build, reference: Build) -> None:
    _rebuild_app(built)  # every entry of app good again
    blobs = _blobs(built)
    for blob in blobs[::2]:
        blob.write_bytes(blob.read_bytes()[:100])
    for blob in blobs[1::2]:
        blob.unlink()
    _rebuild_app(built)
    _same_as_reference(built, reference)
    _verify(built)
    assert " 0 bad and 0 without" in _verify(built)


def test_truncated_entry_is_a_miss(built: Build, reference: Build) -> None:
    entries = [p for p in (_cache(built) / "ac").glob("*/*") if not p.name.startswith(".")]
    for entry in entries:
        entry.write_bytes(entry.read_bytes()[:40])
    _rebuild_app(built)
    _same_as_reference(built, reference)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "fs"
    mount.mkdir()
    assert os.geteuid() == 0, "this test mounts a tmpfs: run the suite as root (CI and ./dev fresh-check do)"
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _warnings(proc_out: str) -> list[str]:
    return [line for line in proc_out.splitlines() if "gn-thinlto: warning: backend cache: cannot store" in line]


def _build_on_an_unwritable_cache(root: Path, reference: Build, cache: Path, name: str, error: str) -> None:
    """Build SOME with CACHE as cache_dir: the build succeeds with one warning naming ERROR, and the binaries
    equal the reference."""
    b = _with_cache(reference, name, _config(root, name, f"cache_dir: {cache}\n"))
    proc = subprocess.run(["ninja", "-C", str(b.out), *SOME], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert len(_warnings(proc.stdout)) == 1 and error in _warnings(proc.stdout)[0]
    _same_as_reference(b, reference, SOME)


def test_a_full_cache_file_system_skips_caching_with_one_warning(
    root: Path, reference: Build, tiny_fs: Path
) -> None:
    (tiny_fs / "cache").mkdir()
    filler = os.open(tiny_fs / "filler", os.O_WRONLY | os.O_CREAT, 0o600)  # full before the build stores anything
    try:
        while os.write(filler, b"\0" * 4096):
            pass
    except OSError as e:
        assert e.errno == errno.ENOSPC, e
    finally:
        os.close(filler)
    _build_on_an_unwritable_cache(root, reference, tiny_fs / "cache", "full", "No space left on device")


def test_a_read_only_cache_skips_caching_with_one_warning(root: Path, reference: Build, tiny_fs: Path) -> None:
    (tiny_fs / "cache").mkdir()
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True)
    _build_on_an_unwritable_cache(root, reference, tiny_fs / "cache", "ro", "Read-only file system")


def test_two_builds_share_one_cache_concurrently(root: Path, reference: Build) -> None:
    shared = root.parent / "shared-cache"
    config = _config(root, "shared", f"cache_dir: {shared}\n")
    outs = [_with_cache(reference, f"shared{n}", config).out for n in (1, 2)]
    procs = [subprocess.Popen(["ninja", "-C", str(out)], stdout=subprocess.PIPE, text=True) for out in outs]
    for p in procs:
        out_text, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out_text[-3000:]
        assert "warning" not in out_text
    for out in outs:
        _same_as_reference(Build(root, out), reference)
    verify = gn_thinlto("cache", "verify", "--cache", str(shared))
    assert verify.returncode == 0 and " 0 bad and 0 without" in verify.stdout


def test_a_build_killed_mid_store_leaves_nothing_wrong(root: Path, reference: Build) -> None:
    out = _with_cache(reference, "killed", _config(root, "killed", "cache_dir: killed-cache\n")).out
    # A backend step killed (SIGKILL) between writing a temporary file and renaming it:
    faulty = subprocess.run(["ninja", "-C", str(out), "gn-thinlto/tool/native/obj/tool/tool.tool.o"],
                            capture_output=True, text=True, env={**os.environ, "GN_THINLTO_FAULT": "kill-mid-store"})
    assert faulty.returncode != 0 and "BACKEND gn-thinlto/tool/native/obj/tool/tool.tool.o" in faulty.stdout, \
        faulty.stdout
    # and the whole build killed with SIGKILL while its backends store:
    build = subprocess.Popen(["ninja", "-C", str(out)], stdout=subprocess.DEVNULL, start_new_session=True)
    cas = out / "killed-cache" / "cas"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(cas.glob("*/*"))) < 3:  # a few stored, most to come
        time.sleep(0.05)
    os.killpg(build.pid, signal.SIGKILL)
    for server in step_server_pids(out):  # and the build directory's step server, in its own session
        os.kill(server, signal.SIGKILL)
    build.wait()
    proc = subprocess.run(["ninja", "-C", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    _same_as_reference(Build(root, out), reference)
    verify = gn_thinlto("cache", "verify", str(out))
    assert verify.returncode == 0 and " 0 bad and 0 without" in verify.stdout, verify.stdout
