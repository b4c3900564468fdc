"""[harden] An import from a module without a module hash stops the thin link: the importer's index, its cache
key and ninja's restat see an imported module's change only through that hash (a review reproduced a stale
`x*3` inlined into `main` after the module changed to `x*5`). Real clang, opt and lld."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.steps.thinlink import check_module_hashes
from thinlto_base.bitcode_blocks import unhashed_modules

TOOLS = ("clang-19", "opt-19", "llvm-ar-19", "llvm-bcanalyzer-19")
pytestmark = pytest.mark.skipif(not all(map(shutil.which, TOOLS)), reason=f"needs {', '.join(TOOLS)}")


def _run(*argv: str, cwd: Path) -> None:
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)


def _thin_link(tmp: Path, opt_flags: tuple[str, ...], archive: bool) -> list[str]:
    """a.o (clang) calls f from b.o (clang -emit-llvm, then opt with OPT_FLAGS); lld's indexes in tmp/stage,
    named after the bitcode as the thin-link step names them. The bitcode paths, a.o first."""
    (tmp / "a.c").write_text("int f(int x);\nint main(int c, char **v) { return f(c); }\n")
    (tmp / "b.c").write_text("int f(int x) { return x * 3; }\n")
    _run("clang-19", "-O2", "-flto=thin", "-c", "a.c", "-o", "a.o", cwd=tmp)
    _run("clang-19", "-O2", "-emit-llvm", "-S", "b.c", "-o", "b.ll", cwd=tmp)
    _run("opt-19", *opt_flags, "b.ll", "-o", "b.o", cwd=tmp)
    inputs = ["a.o", "b.o"]
    if archive:
        _run("llvm-ar-19", "rc", "libb.a", "b.o", cwd=tmp)
        inputs = ["a.o", "libb.a"]
    (tmp / "stage").mkdir()
    _run("clang-19", "-flto=thin", "-fuse-ld=lld", "-Wl,--thinlto-index-only", "-Wl,--thinlto-emit-imports-files",
         "-Wl,--thinlto-prefix-replace=;stage/", *inputs, "-o", "x", cwd=tmp)
    return ["a.o", "libb.a(b.o at 78)" if archive else "b.o"]


def _manifest(tmp: Path, bitcode: list[str]) -> dict[str, object]:
    return {"target": "//app:app", "bitcode": bitcode, "stage_dir": str(tmp / "stage"), "index_dir": str(tmp / "ix")}


@pytest.mark.parametrize("archive", [False, True])
def test_an_import_from_a_module_without_a_hash_stops_the_thin_link(tmp_path: Path, archive: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bitcode = _thin_link(tmp_path, ("-module-summary",), archive)
    dump = subprocess.run(["llvm-bcanalyzer-19", "-dump", "stage/a.o.thinlto.bc"], capture_output=True, text=True)
    assert dump.stdout.count("<ENTRY") == 2 and dump.stdout.count("<HASH") == 1  # b.o's entry has none
    assert unhashed_modules("stage/a.o.thinlto.bc") == [bitcode[1]]
    expected = rf"thin link of //app:app: a.o imports from {re.escape(bitcode[1])}, which has no module hash .*"
    with pytest.raises(GnThinltoError, match=expected + r"leave the target to GN \(targets.exclude\)"):
        check_module_hashes(_manifest(tmp_path, bitcode))


def test_modules_with_hashes_and_unimported_ones_without_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bitcode = _thin_link(tmp_path, ("-module-summary", "-module-hash"), False)
    assert unhashed_modules("stage/a.o.thinlto.bc") == [] == unhashed_modules("stage/b.o.thinlto.bc")
    check_module_hashes(_manifest(tmp_path, bitcode))
    # a module without a hash that nobody imports from: its own backend's key hashes its bitcode
    tmp2 = tmp_path / "second"
    tmp2.mkdir()
    monkeypatch.chdir(tmp2)
    _thin_link(tmp2, ("-module-summary",), False)
    assert unhashed_modules("stage/b.o.thinlto.bc") == ["b.o"]
    check_module_hashes(_manifest(tmp2, ["b.o"]))  # b.o's own index names only itself


def test_a_file_that_is_no_index_is_said_so(tmp_path: Path) -> None:
    (tmp_path / "stage").mkdir()
    (tmp_path / "stage/a.o.thinlto.bc").write_bytes(b"BC\xc0\xde" + b"\xff" * 12)
    (tmp_path / "stage/a.o.imports").write_text("")
    assert unhashed_modules(tmp_path / "stage/a.o.thinlto.bc") is None
    (tmp_path / "stage/empty.thinlto.bc").write_bytes(b"")
    assert unhashed_modules(tmp_path / "stage/empty.thinlto.bc") == []


def test_after_a_success_only_indexes_that_changed_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept index passed the check of the run that kept it (a refused run keeps none): an incremental thin link
    reads only what lld changed, unless the last success was older code's (then `every`)."""
    from gn_thinlto.steps.thinlink_paths import manifest_index_files

    monkeypatch.chdir(tmp_path)
    m = _manifest(tmp_path, _thin_link(tmp_path, ("-module-summary",), False))
    for _b, staged_index, staged_imports, index, imports in manifest_index_files(m):
        Path(index).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(staged_index, index)
        shutil.copy(staged_imports, imports)
    check_module_hashes(m, every=False)  # as kept: not read again
    with pytest.raises(GnThinltoError, match="no module hash"):
        check_module_hashes(m, every=True)
    Path(manifest_index_files(m)[0][3]).write_bytes(b"another index")
    with pytest.raises(GnThinltoError, match="no module hash"):
        check_module_hashes(m, every=False)


def test_dtlto_keys_tell_modules_without_a_hash_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lld's DTLTO jobs are keyed by an index digest without module paths: two different modules without a hash
    (x*3 and x*5) gave one key, and the cache would hand one link the other's object (a review, 2026-12-07)."""
    from goma_ext.bitcode.canonical import canonical_index_digest
    from goma_ext.dtlto.distributor import content_key
    from thinlto_base.keys import BackendJob

    keys, digests = set(), set()
    for factor in (3, 5):
        d = tmp_path / f"x{factor}"
        d.mkdir()
        monkeypatch.chdir(d)
        _thin_link(d, ("-module-summary",), False)
        (d / "b.c").write_text(f"int f(int x) {{ return x * {factor}; }}\n")
        _run("clang-19", "-O2", "-emit-llvm", "-S", "b.c", "-o", "b.ll", cwd=d)
        _run("opt-19", "-module-summary", "b.ll", "-o", "b.o", cwd=d)
        _run("clang-19", "-flto=thin", "-fuse-ld=lld", "-Wl,--thinlto-index-only", "-Wl,--thinlto-prefix-replace=;stage/",
             "a.o", "b.o", "-o", "x", cwd=d)
        job = BackendJob.parse(["clang-19", "-c", "-x", "ir", "a.o", "-fthinlto-index=stage/a.o.thinlto.bc", "-o",
                                "a.native.o", "-O2"])
        digests.add(canonical_index_digest(job.index, job.bitcode))
        keys.add(content_key(job))
    assert len(digests) == 1 and len(keys) == 2


def test_a_backend_that_exits_0_with_an_empty_object_fails_the_step(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """clang-19's ThinLTO backend prints `Error running ThinLTO backend: Error loading imported file …`, exits 0
    and leaves a 0-byte object (a review, 2026-12-07), which lld links without a word; the step used to cache it."""
    from gn_thinlto.steps.backend import run
    from thinlto_base.keys import BackendJob
    from thinlto_base.store import CacheStore
    from thinlto_base.trust import Trust

    monkeypatch.chdir(tmp_path)
    _thin_link(tmp_path, ("-module-summary", "-module-hash"), False)
    Path("b.o").rename("b.o.away")  # the module a.o imports from is gone when its backend runs
    job = BackendJob.parse(["clang-19", "-c", "-x", "ir", "a.o", "-fthinlto-index=stage/a.o.thinlto.bc", "-o",
                            "a.native.o", "-O2"])
    store = CacheStore(str(tmp_path / "cache"), Trust(""))
    assert run(job, store, str(tmp_path / "log")) == 1
    assert not Path("a.native.o").exists()
    assert not [p for p in (tmp_path / "cache").rglob("*") if p.is_file() and "cas" in p.parts]
    Path("b.o.away").rename("b.o")
    assert run(job, store, str(tmp_path / "log")) == 0 and Path("a.native.o").stat().st_size > 0


def test_an_empty_object_from_the_remote_is_compiled_again_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The same clang behaviour on a worker (an import it could not load) would put an empty object into the
    action cache: the step compiles such a job locally instead, and stores only that."""
    from gn_thinlto.steps.backend import run_launched
    from thinlto_base.compile_env import COMPILE_MARK
    from thinlto_base.keys import BackendJob, cache_key, content_key
    from thinlto_base.store import CacheStore
    from thinlto_base.trust import Trust

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("gn_thinlto.steps.backend.REMOTE_STAGE", str(tmp_path / "stage"))
    Path("a.o").write_bytes(b"bitcode")
    ran: list[str] = []

    def runner(argv: list[str]) -> int:
        ran.append(argv[0])
        Path(argv[argv.index("-o") + 1]).write_bytes(b"" if argv[0] == "remote" else b"object")
        return 0

    job = BackendJob.parse(["clang-19", "-c", "-x", "ir", "a.o", "-o", "a.native.o"])
    content = content_key(job)
    store = CacheStore(str(tmp_path / "cache"), Trust(""))
    assert run_launched(job, cache_key(job, content), content, store, str(tmp_path / "log"), ["remote"], runner) == 0
    assert ran == ["remote", COMPILE_MARK] and Path("a.native.o").read_bytes() == b"object"
    assert "exited 0 with an empty object" in capsys.readouterr().err


def test_a_two_step_backend_whose_optimization_leaves_an_empty_module_fails(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A review of 8a874d9: with lld's code generation level apart from its optimization level the backend is two
    commands; the first wrote a 0-byte module after the same error, and the second made a valid, empty object of
    it (584 bytes, no main), which was cached."""
    from gn_thinlto.steps.backend import run
    from thinlto_base.keys import BackendJob
    from thinlto_base.store import CacheStore
    from thinlto_base.trust import Trust

    monkeypatch.chdir(tmp_path)
    _thin_link(tmp_path, ("-module-summary", "-module-hash"), False)
    Path("b.o").rename("b.o.away")
    job = BackendJob.parse(["--cg-opt-level=3", "clang-19", "-c", "-x", "ir", "a.o",
                            "-fthinlto-index=stage/a.o.thinlto.bc", "-o", "a.native.o", "-O2"])
    store = CacheStore(str(tmp_path / "cache"), Trust(""))
    assert run(job, store, str(tmp_path / "log")) == 1 and not Path("a.native.o").exists()
    Path("b.o.away").rename("b.o")
    assert run(job, store, str(tmp_path / "log")) == 0
    symbols = subprocess.run(["llvm-nm-19", "a.native.o"], capture_output=True, text=True).stdout
    assert " T main" in symbols
