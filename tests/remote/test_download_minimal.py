"""[scale] `remote.download: minimal`: the backends' native objects stay in the CAS (stand-ins here), the final links
run remotely, and only the binaries come down. The binaries equal the local build's byte for byte and pass their
self-checks; what reads a native here (a user, a link that runs locally) gets the real bytes; switching modes
back and forth, or losing the remote, never leaves a stand-in where an object is needed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from goma_ext.remote import stats
from goma_ext.remote.names import LINK_STATS_LOG
from tests.builds import Build, copy_without_backends
from tests.remote.conftest import INSTANCE, Cluster
from thinlto_base import remote_stub

JOBS = "6"
SOME = ("crc_tool", "archiver")  # three links (archiver links libcodec.so)
LINKED = ("exe.unstripped/crc_tool", "exe.unstripped/archiver", "lib.unstripped/libcodec.so")  # what lld writes
BINARIES = ("crc_tool", "archiver", "libcodec.so", *LINKED)


def _gen(b: Build, endpoint: str, download: str, tmp: Path) -> None:
    config = tmp / f"gn_thinlto-{download}.yaml"
    config.write_text(f"remote:\n  download: {download}\n")
    proc = subprocess.run([sys.executable, "-m", "gn_thinlto.cli", "gen", str(b.out), "--root", str(b.root),
                           "--config", str(config), "--remote", endpoint], capture_output=True, text=True,
                          env={**os.environ, "GOMA_EXT_REMOTE_INSTANCE": INSTANCE})
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _ninja(out: Path, salt: str, ok: bool = True, **env: str) -> str:
    proc = subprocess.run(["ninja", "-C", str(out), "-j", JOBS, *SOME], capture_output=True, text=True,
                          env={**os.environ, "GOMA_EXT_CACHE_SALT": salt, **env})
    assert (proc.returncode == 0) == ok, proc.stdout[-3000:]
    return proc.stdout


def _natives(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "gn-thinlto").glob("*/native/**/*.o"))}


def _binaries(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in BINARIES}


def _stubs(out: Path) -> list[str]:
    return [name for name, data in _natives(out).items() if remote_stub.is_stub_bytes(data)]


@pytest.mark.slow
def test_minimal_keeps_natives_remote_and_links_remotely_byte_identical(
    cluster: Cluster, tmp_path: Path, salt: str, example_tree: Build
) -> None:
    want_natives = _natives(example_tree.out)
    want = _binaries(example_tree.out)
    b = copy_without_backends(example_tree, tmp_path / "minimal")
    for name in BINARIES:
        (b.out / name).unlink()
    _gen(b, cluster.endpoint, "minimal", tmp_path)
    output = _ninja(b.out, salt)
    assert "goma-ext: warning" not in output, output[-3000:]

    natives = _natives(b.out)
    stubs = _stubs(b.out)
    # every native the build made is a stand-in (none came down), and the binaries equal the local build's
    assert natives and stubs == sorted(natives), [n for n in natives if n not in stubs][:5]
    assert _binaries(b.out) == want
    assert [b.run_binary(name) for name in SOME] == [f"OK {name}" for name in SOME]
    summary = stats.report(b.out)
    assert summary["failed"] == 0 and summary["local_fallbacks"] == 0, summary
    links = stats.report(b.out, LINK_STATS_LOG)  # three links ran remotely; what came down is their outputs
    linked = sum((b.out / name).stat().st_size for name in LINKED)
    assert links["runs"] == links["remote_executions"] == 3 and links["failed"] == 0, links
    assert linked <= links["bytes_downloaded"] <= 1.05 * linked, (links, linked)
    print(f"minimal: {summary}\nlinks: {links}")

    # a user reading a native: `goma-ext fetch` gives it its bytes, equal to the local build's
    one = stubs[0]
    proc = subprocess.run([sys.executable, "-m", "goma_ext.cli", "fetch", "--remote", cluster.endpoint,
                           "--instance", INSTANCE, str(b.out / one)], capture_output=True, text=True)
    assert proc.returncode == 0 and "1 object(s) fetched" in proc.stdout, proc.stdout + proc.stderr
    assert (b.out / one).read_bytes() == want_natives[one]
    # restat: the fetched object holds the stand-in's digest, so nothing is out of date
    assert "no work to do" in _ninja(b.out, salt)

    # a link that runs here (no remote for it) fetches the stand-ins it reads and links the same binary
    (b.out / "crc_tool").unlink()
    (b.out / "exe.unstripped/crc_tool").unlink()
    output = _ninja(b.out, salt, GOMA_EXT_REMOTE="off")
    assert "remote link failed, linking locally" not in output  # with remote off it links locally without trying
    assert (b.out / "crc_tool").read_bytes() == want["crc_tool"]
    crc_natives = {k: v for k, v in _natives(b.out).items() if k.startswith("gn-thinlto/crc_tool/")}
    assert crc_natives and all(not remote_stub.is_stub_bytes(v) for v in crc_natives.values())
    assert crc_natives == {k: want_natives[k] for k in crc_natives}

    # all: every backend runs again (its command changed), every native comes down, same binaries
    _gen(b, cluster.endpoint, "all", tmp_path)
    _ninja(b.out, salt)
    assert _stubs(b.out) == [] and _natives(b.out) == {k: want_natives[k] for k in _natives(b.out)}
    assert _binaries(b.out) == want
    # and minimal again: the objects here stay (they hold the digests), the links run remotely, same binaries
    for name in BINARIES:
        (b.out / name).unlink()
    _gen(b, cluster.endpoint, "minimal", tmp_path)
    _ninja(b.out, salt)
    assert _stubs(b.out) == [] and _binaries(b.out) == want
    # a link that reruns (an input is newer) to the binary already here: not brought down again, but written as
    # lld would have, with a new mtime, so the next build has nothing to do (a link edge has no restat)
    native = next(n for n in _natives(b.out) if n.startswith("gn-thinlto/crc_tool/"))
    os.utime(b.out / native)
    _ninja(b.out, salt)
    assert _binaries(b.out) == want and "no work to do" in _ninja(b.out, salt)

    # the remote gone (an endpoint nobody listens on): the backends run locally, the links run here
    for name in BINARIES:
        (b.out / name).unlink()
    for name in list(_natives(b.out))[:10]:
        (b.out / name).unlink()
    gone = "grpc://127.0.0.1:9"
    _gen(b, gone, "minimal", tmp_path)
    output = _ninja(b.out, salt)
    assert "remote link failed, linking locally" in output and _stubs(b.out) == [], output[-2000:]
    assert _binaries(b.out) == want
