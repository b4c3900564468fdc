"""The backend input processor on real index fixtures and synthetic command lines (no toolchain needed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from goma_ext.bitcode.index import read_index
from goma_ext.errors import GomaExtError
from goma_ext.inputs.backend import archive_of, backend_inputs
from goma_ext.inputs.clang_args import Role, classify, expand_response_files

DATA = Path(__file__).parent / "index_data"


@pytest.fixture(params=[19, 22])
def workdir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    v = request.param
    (tmp_path / "obj").mkdir()
    shutil.copy(DATA / f"llvm{v}-a.o", tmp_path / "obj/a.o")
    shutil.copy(DATA / f"llvm{v}-a.o.thinlto.bc", tmp_path / "obj/a.o.thinlto.bc")
    shutil.copy(DATA / f"llvm{v}-skip.thinlto.bc", tmp_path / "obj/skip.o.thinlto.bc")
    return tmp_path


def test_imports_from_the_index(workdir: Path) -> None:
    result = backend_inputs(["clang", "-c", "-x", "ir", "obj/a.o", "-fthinlto-index=obj/a.o.thinlto.bc", "-o", "a.native.o"], workdir)
    assert result.imports == ("b.o", "libd.a") and result.output == "a.native.o" and not result.skip
    assert result.paths == ("obj/a.o", "obj/a.o.thinlto.bc", "b.o", "libd.a")


def test_own_module_found_by_hash_not_path(workdir: Path) -> None:
    # the index calls the module "a.o"; the backend names it obj/a.o: the module hash decides
    result = backend_inputs(["clang", "-c", "-x", "ir", str(workdir / "obj/a.o"), "-fthinlto-index=obj/a.o.thinlto.bc"], workdir)
    assert result.bitcode == "obj/a.o" and result.imports == ("b.o", "libd.a") and result.output is None


def test_imports_file_must_agree(workdir: Path) -> None:
    argv = ["clang", "-c", "-x", "ir", "obj/a.o", "-fthinlto-index=obj/a.o.thinlto.bc"]
    member = read_index(workdir / "obj/a.o.thinlto.bc").imported_paths("a.o")[1]
    (workdir / "obj/a.o.imports").write_text(f"b.o\n{member}x\n")
    with pytest.raises(GomaExtError, match=r"obj/a.o.imports and obj/a.o.thinlto.bc disagree: only in obj/a.o.imports: \['libd.a.*x'\]; only in obj/a.o.thinlto.bc: \['libd.a"):
        backend_inputs(argv, workdir)
    (workdir / "obj/a.o.imports").write_text(f"{member}\nb.o\n")
    assert backend_inputs(argv, workdir).imports == ("b.o", "libd.a")


def test_skip_and_empty_indexes(workdir: Path) -> None:
    skip = backend_inputs(["clang", "-c", "-x", "ir", "obj/a.o", "-fthinlto-index=obj/skip.o.thinlto.bc"], workdir)
    assert skip.skip and skip.imports == ()
    (workdir / "obj/empty.thinlto.bc").write_bytes(b"")
    (workdir / "obj/empty.imports").write_text("")
    empty = backend_inputs(["clang", "-c", "-x", "ir", "obj/a.o", "-fthinlto-index=obj/empty.thinlto.bc"], workdir)
    assert not empty.skip and empty.paths == ("obj/a.o", "obj/empty.thinlto.bc")


def test_other_inputs_and_response_files(workdir: Path) -> None:
    (workdir / "prof").mkdir()
    (workdir / "a.rsp").write_text("-O2 '@b.rsp' -fsanitize-ignorelist=ign.txt\n")
    (workdir / "b.rsp").write_text("-fprofile-use=prof -fprofile-sample-use=s.prof -mllvm -x=y\n")
    result = backend_inputs(["clang", "@a.rsp", "-c", "-x", "ir", "obj/a.o", "-fthinlto-index=obj/skip.o.thinlto.bc",
                             "-fprofile-instr-use=i.profdata", "-MF", "dep.d", "-o", "out.o"], workdir)
    assert result.other_inputs == ("a.rsp", "b.rsp", "prof/default.profdata", "s.prof", "ign.txt", "i.profdata")
    assert "dep.d" not in result.paths and result.output == "out.o"


def test_command_line_errors(workdir: Path) -> None:
    with pytest.raises(GomaExtError, match="exactly one bitcode input, found 2"):
        backend_inputs(["clang", "-c", "-x", "ir", "obj/a.o", "b.o"], workdir)
    with pytest.raises(GomaExtError, match="cannot read response file"):
        backend_inputs(["clang", "@missing.rsp", "obj/a.o"], workdir)
    with pytest.raises(GomaExtError, match="needs a value"):
        backend_inputs(["clang", "obj/a.o", "-o"], workdir)
    (workdir / "loop.rsp").write_text("@loop.rsp\n")
    with pytest.raises(GomaExtError, match="nested deeper"):
        backend_inputs(["clang", "@loop.rsp"], workdir)
    for other in (19, 22):  # one of them is from the other LLVM: a different module hash
        shutil.copy(DATA / f"llvm{other}-a.o", workdir / f"other{other}.o")
    with pytest.raises(GomaExtError, match="does not list the backend's bitcode other"):
        for other in (19, 22):
            backend_inputs(["clang", "-x", "ir", f"other{other}.o", "-fthinlto-index=obj/a.o.thinlto.bc"], workdir)


def test_flag_table() -> None:
    args = classify(["-x", "ir", "-xir", "in.o", "-ofoo.o", "-Xclang", "-foo", "-mllvm", "bar", "--", "-weird.o"])
    assert [(a.role, a.value) for a in args] == [
        (Role.VALUE, "ir"), (Role.VALUE, "ir"), (Role.INPUT, "in.o"), (Role.OUTPUT, "foo.o"),
        (Role.VALUE, "-foo"), (Role.VALUE, "bar"), (Role.INPUT, "-weird.o"),
    ]
    assert expand_response_files(["a", "@r"], lambda p: 'x "y z"')[0] == ("a", "x", "y z")


def test_archive_of() -> None:
    assert archive_of("lib/libx.a(foo.o at 1234)") == "lib/libx.a"
    assert archive_of("obj/foo.o") == "obj/foo.o"


def test_compile_flags_with_separate_values_are_not_inputs() -> None:
    args = classify(["-I", "inc", "-isystem", "sys", "-D", "X=1", "-include-pch", "p.pch", "-include", "h.h",
                     "-Iinc2", "-DY", "-resource-dir", "rd", "-x", "ir", "obj/a.o"])
    assert [a.value for a in args if a.role is Role.INPUT] == ["obj/a.o"]


@pytest.mark.parametrize("flags", [["-fno-integrated-as"], ["-no-integrated-as"], ["-B/opt/gnu/bin"], ["-B", "x"],
                                   ["--gcc-toolchain=/opt/gcc"], ["--prefix=/opt"], ["@prog.rsp"], ["-march=native"],
                                   ["-mtune=native"], ["-mcpu=native"]])
def test_a_backend_that_would_depend_on_the_worker_runs_locally(flags: list[str], workdir: Path) -> None:
    """The driver would run the worker's `as` (or look in directories the action does not carry), or build for
    the worker's CPU: the remote object would depend on what no key covers ([harden], the remote-vs-local
    reviews; with -march=native an AVX-512 worker's object crashed an AVX2 client's binary)."""
    from goma_ext.reapi.errors import InputError
    from goma_ext.remote.action_inputs import action_files

    (workdir / "prog.rsp").write_text("-O2 -fno-integrated-as\n")
    argv = ["clang", "-c", "-x", "ir", "obj/a.o", "-fthinlto-index=obj/skip.o.thinlto.bc", *flags, "-o", "a.native.o"]
    with pytest.raises(GomaExtError, match=r"the object would depend on the worker"):
        backend_inputs(argv, workdir)
    with pytest.raises(InputError, match=r"the backend runs locally"):
        action_files(argv, workdir)
    assert action_files([a for a in argv if a not in flags], workdir).outputs == ("a.native.o",)


def test_configuration_files_are_read_for_what_makes_the_object_machine_dependent(workdir: Path) -> None:
    """A `--config` file with -fno-integrated-as, or a configuration directory of the machine (a review,
    2026-12-07): the remote object would come from the worker's `as`, or its own configuration."""
    from goma_ext.inputs.backend import MachineDependent

    (workdir / "as.cfg").write_text("# an assembler of our own\n-fno-integrated-as\n")
    (workdir / "plain.cfg").write_text("-O2 # nothing of the machine\n")
    base = ["clang", "-c", "-x", "ir", "obj/a.o", "-fthinlto-index=obj/skip.o.thinlto.bc", "-o", "a.native.o"]
    (workdir / "cfgs").mkdir()
    (workdir / "cfgs/outer.cfg").write_text("@inner.cfg\n")  # relative to the configuration file's directory
    (workdir / "cfgs/inner.cfg").write_text("-mcpu=native+crc\n")
    (workdir / "deep.rsp").write_text("@as.rsp\n")
    (workdir / "as.rsp").write_text("-march=native\n")
    for flags, machine in ((["--config=./as.cfg"], "-fno-integrated-as"),
                           (["--config", "./as.cfg"], "-fno-integrated-as"),
                           (["--config-user-dir=elsewhere"], "--config-user-dir=elsewhere"),
                           (["--config-user-dir=cfgs"], "-mcpu=native\\+crc"),  # its files are read as clang may
                           (["--config=cfgs/outer.cfg"], "-mcpu=native\\+crc"), (["@deep.rsp"], "-march=native")):
        with pytest.raises(MachineDependent, match=f"^{machine}: the object would depend on the worker"):
            backend_inputs([*base, *flags], workdir)
    assert backend_inputs([*base, "--config=./plain.cfg"], workdir).other_inputs == ("plain.cfg",)


def test_a_job_that_starts_a_program_of_the_machine_is_not_cached(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Its object depends on the `as` on PATH (or what -B names), which no key covers (a review, 2026-12-07)."""
    from gn_thinlto.steps.backend import serve
    from thinlto_base.keys import BackendJob
    from thinlto_base.store import CacheStore
    from thinlto_base.trust import Trust

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.o").write_bytes(b"bitcode")
    (tmp_path / "flags.rsp").write_text("-fno-integrated-as\n")
    runs: list[list[str]] = []

    def compile_(argv: list[str]) -> int:
        runs.append(argv)
        Path(argv[argv.index("-o") + 1]).write_bytes(b"object")
        return 0

    store = CacheStore(str(tmp_path / "cache"), Trust(""))
    (tmp_path / "outer.rsp").write_text("@flags.rsp\n")
    (tmp_path / "as.cfg").write_text("-fno-integrated-as\n")
    for extra in ([], ["-fno-integrated-as"], ["-B/opt/binutils/bin"], ["@flags.rsp"], ["@outer.rsp"],
                  ["--config=./as.cfg"]):
        job = BackendJob.parse(["clang-19", "-c", "-x", "ir", "a.o", "-o", "n.o", *extra])
        assert job.cacheable() == (not extra)
        runs.clear()
        served = [serve(job, store, str(tmp_path / "log"), (), compile_) for _ in range(2)]
        assert served == ([(0, True), (0, False)] if not extra else [(0, True), (0, True)]), extra
        assert len(runs) == (1 if not extra else 2), extra
