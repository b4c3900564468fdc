"""Two-step backends (lld's --lto-CGO differs from --lto-O): the commands, the cache key, local and launched runs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from gn_thinlto.steps.backend import run
from thinlto_base.keys import BackendJob, cache_key, content_key
from thinlto_base.store import CacheStore
from thinlto_base.two_step import split_codegen_level, two_step_commands

CLANG = ["clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "a.native.o",
         "-O1", "-funroll-loops", "-ffunction-sections", "-fPIC", "-mllvm", "-x=1"]


def test_two_step_commands_set_the_levels_apart() -> None:
    optimize, codegen = two_step_commands(CLANG, "2", "m.bc")
    assert optimize == ("clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "m.bc",
                        "-O1", "-funroll-loops", "-ffunction-sections", "-fPIC", "-mllvm", "-x=1", "-emit-llvm")
    assert codegen == ("clang", "-c", "-x", "ir", "m.bc", "-o", "a.native.o", "-ffunction-sections", "-fPIC",
                       "-mllvm", "-x=1", "-O2", "-Xclang", "-disable-llvm-passes")


def test_split_dwarf_is_left_to_the_code_generation_step() -> None:
    """The optimized module is the same without -gsplit-dwarf and no .dwo comes of it, so the first step (a
    remote action of its own) names no .dwo output; the second keeps the flag."""
    optimize, codegen = two_step_commands([*CLANG, "-g", "-gsplit-dwarf"], "2", "m.bc")
    assert "-gsplit-dwarf" not in optimize and "-g" in optimize
    assert "-gsplit-dwarf" in codegen


def test_the_codegen_option_leads_the_command() -> None:
    assert split_codegen_level(["--cg-opt-level=3", *CLANG]) == ("3", CLANG)
    assert split_codegen_level(CLANG) == ("", CLANG)
    with pytest.raises(ValueError, match="0, 1, 2 or 3"):
        split_codegen_level(["--cg-opt-level=4", *CLANG])
    job = BackendJob.parse(["--cg-opt-level=2", *CLANG])
    assert (job.codegen, job.argv, job.bitcode, job.output) == ("2", tuple(CLANG), "a.o", "a.native.o")


def test_the_key_covers_the_codegen_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name, data in (("a.o", b"BITCODE"), ("a.o.thinlto.bc", b"INDEX"), ("clang", b"")):
        (tmp_path / name).write_bytes(data)
    argv = [str(tmp_path / "clang"), *CLANG[1:]]
    one, two, three = (BackendJob.parse(p + argv) for p in ([], ["--cg-opt-level=2"], ["--cg-opt-level=3"]))
    assert len({content_key(one), content_key(two), content_key(three)}) == 3
    assert len({cache_key(one), cache_key(two), cache_key(three)}) == 3


@pytest.fixture
def compiler(tmp_path: Path) -> Path:
    """A stand-in for clang: writes 'opt(BITCODE)' with -emit-llvm, else 'native(INPUT)' (the input's content,
    '-O<level>' and whether passes ran), and logs its arguments."""
    script = tmp_path / "fake-clang"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {tmp_path}/runs\n'
        'emit=""; passes=on\n'
        'for a in "$@"; do case "$a" in -emit-llvm) emit=1;; -disable-llvm-passes) passes=off;; -O*) lvl="$a";; esac;'
        ' done\n'
        'while [ "$1" != "-o" ]; do case "$1" in ir) shift; in="$1";; esac; shift; done\n'
        'if [ -n "$emit" ]; then printf "opt%s(%s)" "$lvl" "$(cat "$in")" > "$2";'
        ' else printf "native%s-%s(%s)" "$lvl" "$passes" "$(cat "$in")" > "$2"; fi\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _two_step_job(compiler: Path, tmp: Path) -> BackendJob:
    (tmp / "a.o").write_bytes(b"BITCODE")
    (tmp / "out").mkdir(exist_ok=True)
    (tmp / "a.o.thinlto.bc").write_bytes(b"INDEX")
    return BackendJob.parse(["--cg-opt-level=2", str(compiler), "-c", "-x", "ir", str(tmp / "a.o"),
                             f"-fthinlto-index={tmp / 'a.o.thinlto.bc'}", "-o", str(tmp / "out/a.native.o"), "-O0"])


def test_a_local_two_step_miss_optimizes_then_generates_code(tmp_path: Path, compiler: Path) -> None:
    job = _two_step_job(compiler, tmp_path)
    assert run(job, CacheStore(tmp_path / "cache"), tmp_path / "log") == 0
    assert Path(job.output).read_bytes() == b"native-O2-off(opt-O0(BITCODE))"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.native.o"]  # the module is removed
    runs = (tmp_path / "runs").read_text().splitlines()
    assert len(runs) == 2 and "-fthinlto-index" in runs[0] and "-fthinlto-index" not in runs[1]


def test_a_launched_two_step_miss_is_two_launches_under_the_content_stage(
    tmp_path: Path, compiler: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    launcher = tmp_path / "launcher"
    launcher.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/launched\nwhile [ "$1" != "--" ]; do shift; done\nshift\n'
                        'exec "$@"\n')
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    job = _two_step_job(compiler, tmp_path)
    assert run(job, CacheStore(tmp_path / "cache"), tmp_path / "log", [str(launcher), "--"]) == 0
    assert Path(job.output).read_bytes() == b"native-O2-off(opt-O0(BITCODE))"
    stage = f"gn-thinlto/remote-stage/{content_key(job)}"
    launched = (tmp_path / "launched").read_text().splitlines()
    assert len(launched) == 2
    assert f"-o {stage}/optimized.bc" in launched[0] and f"-x ir {stage}/optimized.bc" in launched[1]
    assert sorted(p.name for p in (tmp_path / stage).iterdir()) == [".lock"]
