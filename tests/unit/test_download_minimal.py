"""[scale] `remote.download: minimal` pieces: stand-ins, the backend step's handling of them, what a remote lld
reads (link_files), and `goma-ext fetch` when the CAS cannot give an object back."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gn_thinlto.steps.backend import run
from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.remote.config import RemoteConfig, load_config
from goma_ext.remote.fetch import FetchError, materialize
from goma_ext.remote.remote_link import ABS_DIR, Unlinkable, link_files
from thinlto_base import remote_stub
from thinlto_base.keys import BackendJob, cache_key, kept_key
from thinlto_base.store import CacheStore, fetch_outputs

H = "ab" * 32
STUB = remote_stub.Stub(H, 1234, False, "grpc://127.0.0.1:9", "inst")


def test_a_stand_in_reads_back_and_nothing_else_passes_for_one(tmp_path: Path) -> None:
    data = STUB.text()
    assert remote_stub.parse(data) == STUB and remote_stub.is_stub_bytes(data)
    assert data.startswith(b"!<gn-thinlto remote output>\n")
    for bad in (b"\x7fELF" + data, data.replace(H.encode(), b"xy" * 32), data[:40],
                remote_stub.MAGIC + b'{"digest": "' + H.encode() + b'/1e3", "executable": false}\n',
                data + b"#" * remote_stub.MAX_STUB_BYTES):
        assert remote_stub.parse(bad) is None, bad[:80]
    assert remote_stub.kept_remote("a/b.o") and remote_stub.kept_remote("b.dwo")
    assert not remote_stub.kept_remote("stage/optimized.bc")


def test_holds_is_the_same_stand_in_or_the_object_itself(tmp_path: Path) -> None:
    import hashlib

    obj = b"native object bytes"
    stub = remote_stub.Stub(hashlib.sha256(obj).hexdigest(), len(obj), False, "grpc://h:1", "")
    path = tmp_path / "x.o"
    assert not remote_stub.holds(path, stub)
    path.write_bytes(stub.text())
    assert remote_stub.holds(path, stub)
    path.write_bytes(obj)
    assert remote_stub.holds(path, stub)
    path.write_bytes(b"other bytes of size 19"[:19])
    assert not remote_stub.holds(path, stub)


def test_the_setting_is_checked_and_carried() -> None:
    cfg = load_config({"download": "minimal"}, {}, {"endpoint": "grpc://127.0.0.1:1"})
    assert cfg is not None and cfg.download == "minimal"
    from goma_ext.remote.config import carried_settings
    assert carried_settings(cfg)["download"] == "minimal"
    default = load_config({}, {}, {"endpoint": "grpc://127.0.0.1:1"})
    assert default is not None and "download" not in carried_settings(default)
    env = load_config({}, {"GOMA_EXT_REMOTE_DOWNLOAD": "minimal"}, {"endpoint": "grpc://127.0.0.1:1"})
    assert env is not None and env.download == "minimal"
    with pytest.raises(RemoteConfigError, match=r"remote\.download 'some': expected one of all, minimal"):
        load_config({"download": "some"}, {}, {"endpoint": "grpc://127.0.0.1:1"})


def test_a_stand_in_enters_the_local_cache_only_for_builds_that_keep_natives_remote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    launcher = tmp_path / "launcher"  # a remote run under `minimal`: the output comes back as a stand-in
    launcher.write_text("#!/bin/sh\necho run >> runs\nwhile [ \"$1\" != \"-o\" ]; do shift; done\n"
                        f"cp {tmp_path}/stub \"$2\"\n")
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "stub").write_bytes(STUB.text())
    (tmp_path / "a.o").write_bytes(b"BITCODE")
    (tmp_path / "a.o.thinlto.bc").write_bytes(b"INDEX")
    (tmp_path / "clang").write_bytes(b"")
    job = BackendJob.parse([str(tmp_path / "clang"), "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc",
                            "-o", "out/a.native.o"])
    store = CacheStore(tmp_path / "cache")
    minimal = [str(launcher), "--download", "minimal", "--"]
    assert run(job, store, tmp_path / "log", minimal) == 0
    assert Path("out/a.native.o").read_bytes() == STUB.text()
    key = cache_key(job)
    assert not fetch_outputs(store, key, {"o": "elsewhere.o"})  # never under the objects' key
    assert fetch_outputs(store, kept_key(key), {"o": "elsewhere.o"})
    Path("out/a.native.o").unlink()
    assert run(job, store, tmp_path / "log", minimal) == 0  # another minimal build: from the local cache
    assert Path("runs").read_text().count("run") == 1
    Path("out/a.native.o").unlink()
    assert run(job, store, tmp_path / "log", [str(launcher), "--"]) == 0  # `all` does not take it
    assert Path("runs").read_text().count("run") == 2


ELF = b"\x7fELF" + b"\0" * 60


def _tree(tmp: Path) -> tuple[Path, Path]:
    """A build directory below an exec root, and a fake system root outside it."""
    root, sysdir = tmp / "src", tmp / "sys"
    out = root / "out"
    (out / "obj").mkdir(parents=True)
    (out / "obj/a.o").write_bytes(ELF)
    (out / "obj/n.o").write_bytes(STUB.text())
    (out / "link.rsp").write_text("obj/a.o obj/n.o\n")
    (root / "build").mkdir()
    (root / "build/v.map").write_text("{ global: *; };\n")
    for rel, data in (("lib/crt1.o", ELF), ("lib/libc.so.6", ELF), ("lib/libc_nonshared.a", b"!<arch>\n"),
                      ("lib/libgcc.a", b"!<arch>\n"), ("lib/libgcc_s.so.1", ELF), ("lib/libfoo.so", ELF),
                      ("lib/libfoo.a", b"!<arch>\n")):
        (sysdir / rel).parent.mkdir(parents=True, exist_ok=True)
        (sysdir / rel).write_bytes(data)
    (sysdir / "lib/libc.so").write_text(
        f"/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( {sysdir}/lib/libc.so.6 "
        f"{sysdir}/lib/libc_nonshared.a AS_NEEDED ( {sysdir}/lib/libgcc_s.so.1 ) )\n")
    (sysdir / "lib/libgcc_s.so").write_text("GROUP ( libgcc_s.so.1 -lgcc )\n")
    return root, out


def test_link_files_places_every_file_lld_reads(tmp_path: Path) -> None:
    root, out = _tree(tmp_path)
    sysdir = tmp_path / "sys"
    args = ["-o", "./bin/app", f"{sysdir}/lib/crt1.o", f"-L{sysdir}/lib", "@link.rsp",
            "--version-script", "../build/v.map", "-lfoo", "-Bstatic", "-lfoo", "-Bdynamic", "-lc", "-lgcc_s",
            "-rpath=$ORIGIN", "-dynamic-linker", "/lib64/ld-linux-x86-64.so.2"]
    files = link_files(args, out, root)
    abs_sys = f"{ABS_DIR}{sysdir}"
    assert sorted(files.reads) == sorted([
        "build/v.map", "out/obj/a.o", "out/obj/n.o", f"{abs_sys}/lib/crt1.o", f"{abs_sys}/lib/libfoo.so",
        f"{abs_sys}/lib/libfoo.a", f"{abs_sys}/lib/libc.so", f"{abs_sys}/lib/libc.so.6",
        f"{abs_sys}/lib/libc_nonshared.a", f"{abs_sys}/lib/libgcc_s.so.1", f"{abs_sys}/lib/libgcc_s.so",
        f"{abs_sys}/lib/libgcc.a"])
    assert files.outputs == ["bin/app"]
    rel = f"../{abs_sys}"
    assert files.args == ["-o", "bin/app", f"{rel}/lib/crt1.o", f"-L{rel}/lib", "obj/a.o", "obj/n.o",
                          "--version-script", "../build/v.map", "-lfoo", "-Bstatic", "-lfoo", "-Bdynamic", "-lc",
                          "-lgcc_s", "-rpath=$ORIGIN", "-dynamic-linker", "/lib64/ld-linux-x86-64.so.2",
                          f"--sysroot=../{ABS_DIR}"]


@pytest.mark.parametrize(("args", "why"), [
    (["-o", "app", "obj/a.o", "-lmissing", "-L."], "library -lmissing not found"),
    (["-o", "app", "obj/a.o", "--reproduce", "r.tar"], "--reproduce is not supported"),
    (["-o", "../app", "obj/a.o"], "not below the link's directory"),
    (["obj/a.o"], "names no output"),
    (["-o", "app", "obj/gone.o"], "input obj/gone.o is not a file"),
])
def test_link_files_refuses_what_it_cannot_place(tmp_path: Path, args: list[str], why: str) -> None:
    root, out = _tree(tmp_path)
    with pytest.raises(Unlinkable, match=why):
        link_files(args, out, root)


def test_fetch_removes_stand_ins_the_cas_cannot_give_back(tmp_path: Path) -> None:
    path = tmp_path / "n.o"
    path.write_bytes(STUB.text())
    other = tmp_path / "real.o"
    other.write_bytes(ELF)
    base = RemoteConfig(endpoint=STUB.endpoint, instance=STUB.instance, max_attempts=1, rpc_timeout_s=2.0)
    with pytest.raises(FetchError, match=r"1 native object.*could not be fetched.*stand-ins were removed"):
        materialize([path, other], base)
    assert not path.exists() and other.read_bytes() == ELF
    assert materialize([other], base).not_stubs == [os.fspath(other)]


def test_fetch_sends_credentials_only_to_the_configured_server(tmp_path: Path) -> None:
    """A stand-in is a file in a build directory: whoever wrote it must not make us send our token elsewhere."""
    path = tmp_path / "n.o"
    path.write_bytes(STUB.text())
    mine = RemoteConfig(endpoint="grpc://127.0.0.1:8", instance=STUB.instance, token="secret")
    with pytest.raises(FetchError, match=r"name the server grpc://127\.0\.0\.1:9 .*not the configured grpc://127\.0\.0\.1:8"):
        materialize([path], mine)
    with pytest.raises(FetchError, match="no remote is configured"):
        materialize([path], None)
    assert path.read_bytes() == STUB.text()  # left as it was
