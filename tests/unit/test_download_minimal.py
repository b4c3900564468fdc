"""[scale] `remote.download: minimal` pieces: stand-ins, the backend step's handling of them, what a remote lld
reads (link_files), and `goma-ext fetch` when the CAS cannot give an object back."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from gn_thinlto.steps.backend import run
from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.remote.config import RemoteConfig, download_from_flags, load_config
from goma_ext.remote.fetch import FetchError, materialize
from goma_ext.remote.remote_link import ABS_DIR, Unlinkable, gnu_quote, gnu_split, link_files
from tests.bounded import returns_within
from thinlto_base import remote_stub
from thinlto_base import store as store_module
from thinlto_base.keys import BackendJob, cache_key
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
    assert remote_stub.kept_remote("a/b.o") and not remote_stub.kept_remote("b.dwo")  # llvm-dwp reads .dwo here
    assert store_module.STUB_MAGIC == remote_stub.MAGIC
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
    (tmp_path / "stand-in").write_bytes(stub.text())
    path.unlink()
    path.symlink_to(tmp_path / "stand-in")  # a link is not the output's own file, whatever it names
    assert not remote_stub.holds(path, stub) and remote_stub.read_stub(path) == stub
    path.unlink()
    os.mkfifo(path)  # neither check blocks on a FIFO
    assert returns_within(lambda: (remote_stub.holds(path, stub), remote_stub.read_stub(path))) == (False, None)


def test_the_setting_is_checked_and_carried() -> None:
    cfg = load_config({"download": "minimal"}, {}, {"endpoint": "grpc://127.0.0.1:1"})
    assert cfg is not None and cfg.download == "minimal"
    from goma_ext.remote.config import carried_settings
    assert carried_settings(cfg)["download"] == "minimal"
    default = load_config({}, {}, {"endpoint": "grpc://127.0.0.1:1"})
    assert default is not None and "download" not in carried_settings(default)
    env = load_config({}, {"GOMA_EXT_REMOTE_DOWNLOAD": "minimal"}, {"endpoint": "grpc://127.0.0.1:1"})
    assert env is not None and env.download == "minimal"  # what gen reads
    # a backend takes it from its command line only (gen's decision, which gives the final links their lld)
    assert download_from_flags(env, {}).download == "all"
    assert download_from_flags(env, {"download": "minimal"}).download == "minimal"
    with pytest.raises(RemoteConfigError, match=r"remote\.download 'some': expected one of all, minimal"):
        load_config({"download": "some"}, {}, {"endpoint": "grpc://127.0.0.1:1"})


def test_a_stand_in_never_enters_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the action cache may give a stand-in (the proxy checks that the CAS still holds the object): a local
    entry would serve a dead one for ever once the CAS evicts it, and an `all` build must never get one."""
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
    assert not fetch_outputs(store, cache_key(job), {"o": "elsewhere.o"})
    Path("out/a.native.o").unlink()
    assert run(job, store, tmp_path / "log", minimal) == 0  # the launcher runs again
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
    # absolute paths stay as they are (the remote lld reads them under --chroot); search directories move
    assert files.args == ["-o", "bin/app", f"{sysdir}/lib/crt1.o", f"-L{rel}/lib", "obj/a.o", "obj/n.o",
                          "--version-script", "../build/v.map", "-lfoo", "-Bstatic", "-lfoo", "-Bdynamic", "-lc",
                          "-lgcc_s", "--rpath=$ORIGIN", "--dynamic-linker", "/lib64/ld-linux-x86-64.so.2",
                          "--chroot", f"../{ABS_DIR}"]


def test_linker_scripts_are_read_as_lld_reads_them(tmp_path: Path) -> None:
    root, out = _tree(tmp_path)
    sysdir = tmp_path / "sys"
    (out / "obj/b.o").write_bytes(ELF)
    (out / "g.ld").write_text(f"# a comment naming nothing.o\n"
                              f"GROUP ( AS_NEEDED ( obj/a.o ) obj/b.o {sysdir}/lib/crt1.o )\n")
    (out / "syms.txt").write_text("INSERT\nOUTPUT\n")  # a symbol list, never parsed as a script
    files = link_files(["-o", "app", "-Tg.ld", "--symbol-ordering-file=syms.txt"], out, root)
    assert {"out/obj/a.o", "out/obj/b.o", f"{ABS_DIR}{sysdir}/lib/crt1.o", "out/syms.txt"} <= set(files.reads)
    assert files.args[:3] == ["-o", "app", "-Tg.ld"]


@pytest.mark.parametrize(("args", "script", "why"), [
    (["-o", "app", "s.ld"], "SEARCH_DIR(/usr/lib)\n", r"SEARCH_DIR\(/usr/lib\) is an absolute directory"),
    (["-o", "app", "--some-new-option=/etc/x"], "", "names an absolute path this link cannot place"),
    (["-o", "app", "s.ld"], "OUTPUT(x)\n", "OUTPUT is not supported"),
    (["-o", "app", "--chroot=/x", "obj/a.o"], "", "a --chroot of its own"),
])
def test_what_a_remote_lld_could_read_elsewhere_is_refused(tmp_path: Path, args: list[str], script: str,
                                                          why: str) -> None:
    root, out = _tree(tmp_path)
    (out / "s.ld").write_text(script)
    with pytest.raises(Unlinkable, match=why):
        link_files(args, out, root)


def test_one_dash_long_options_are_recognised(tmp_path: Path) -> None:
    root, out = _tree(tmp_path)
    sysdir = tmp_path / "sys"
    files = link_files(["-o", "app", f"-sysroot={sysdir}", "-version-script=../build/v.map", "obj/a.o"], out, root)
    assert f"--sysroot=../{ABS_DIR}{sysdir}" in files.args and "build/v.map" in files.reads


def test_response_files_are_read_with_lld_s_quoting(tmp_path: Path) -> None:
    assert gnu_split('a "b c" \'d e\' f\\ g "h\\"i" "unterminated') == ["a", "b c", "d e", "f g", 'h"i', "unterminated"]
    args = ["a b", 'c"d', "e\\f", ""]
    assert gnu_split(" ".join(gnu_quote(a) for a in args)) == args


def test_a_deeply_nested_stand_in_is_no_stand_in() -> None:
    assert remote_stub.parse(remote_stub.MAGIC + b"[" * 4000) is None


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


def test_fetch_never_puts_an_object_over_a_file_that_changed_since_it_read_the_stand_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`goma-ext fetch` beside a running build: a backend that renames its new output into place while the fetch
    writes the old stand-in's object keeps its output (the object would be a stale one, which the link would use
    and ninja would take as up to date)."""
    from goma_ext.remote import fetch

    path = tmp_path / "n.o"
    path.write_bytes(STUB.text())
    os.utime(path, ns=(5, 5))
    fetch._write(os.fspath(path), STUB, ELF)  # nothing meanwhile: replaced, with the stand-in's mtime
    assert path.read_bytes() == ELF and path.stat().st_mtime_ns == 5
    path.write_bytes(STUB.text())
    new = STUB.text().replace(H.encode(), b"cd" * 32)
    real_utime = os.utime

    def backend_renames_its_output_meanwhile(p: object, *args: object, **kwargs: object) -> None:
        real_utime(p, *args, **kwargs)  # type: ignore[arg-type]
        if str(p).endswith(".tmp"):
            (tmp_path / "new.tmp2").write_bytes(new)
            os.replace(tmp_path / "new.tmp2", path)

    monkeypatch.setattr(fetch.os, "utime", backend_renames_its_output_meanwhile)
    fetch._write(os.fspath(path), STUB, ELF)
    monkeypatch.undo()
    assert path.read_bytes() == new and sorted(p.name for p in tmp_path.iterdir()) == ["n.o"]


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


def test_gen_gives_final_links_the_remote_lld_or_says_why_it_cannot() -> None:
    from gn_thinlto.errors import GnThinltoError
    from gn_thinlto.plan.model import FinalLink, GraphPlan, RemoteBackends
    from gn_thinlto.render.ninja import REMOTE_LINK_DIR, final_argv

    def link(*flags: str) -> FinalLink:
        return FinalLink(("app",), (), (), (), ("python3", "wrap.py", "--", "clang++", *flags, "-o", "app"), "",
                         "f.rsp", (), "LINK app", driver_at=3)

    plan = GraphPlan(targets=(), refusals=(), remote=RemoteBackends(("run",), 4, link_launcher=("remote_link",)))
    assert final_argv(plan, link("-fuse-ld=lld"))[3:5] == ("clang++", f"-B{REMOTE_LINK_DIR}/")
    assert final_argv(GraphPlan(targets=(), refusals=()), link("-fuse-ld=lld"))[4] == "-fuse-ld=lld"
    for flags, why in ((("-fuse-ld=gold",), "does not ask for lld"), (("-fuse-ld=lld", "-Bmy/"), "its own linker"),
                       (("-fuse-ld=lld", "--ld-path=/x/ld"), "its own linker")):
        with pytest.raises(GnThinltoError, match=why):
            final_argv(plan, link(*flags))
