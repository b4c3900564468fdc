"""The backend step's content-addressed cache: keys, hits/misses, restat-friendly writes, the log."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from gn_thinlto.steps.backend import run
from gn_thinlto.steps.backend_log import read_stats
from gn_thinlto.steps.step_args import StepArgs, parse_args
from thinlto_base.keys import BackendJob, cache_key, content_key
from thinlto_base import remote_stub
from thinlto_base.store import CacheStore
from thinlto_base.trust import Trust


@pytest.fixture
def compiler(tmp_path: Path) -> Path:
    """A stand-in for clang: writes 'native(<bitcode bytes>)' to -o, and counts its runs."""
    script = tmp_path / "fake-clang"
    script.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "-o" ]; do case "$1" in ir) shift; in="$1";; esac; shift; done\n'
        f'echo run >> {tmp_path}/runs\n'
        'printf "native(%s)" "$(cat "$in")" > "$2"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _job(compiler: Path, tmp: Path, target: str, bitcode: str = "a.o") -> BackendJob:
    (tmp / target).mkdir(exist_ok=True)
    index = tmp / target / "a.o.thinlto.bc"
    index.write_bytes(b"INDEX")
    return BackendJob.parse([str(compiler), "-c", "-x", "ir", str(tmp / bitcode), f"-fthinlto-index={index}",
                             "-o", str(tmp / target / "a.native.o"), "-O2"])


def test_identical_jobs_in_two_links_run_once(tmp_path: Path, compiler: Path) -> None:
    (tmp_path / "a.o").write_bytes(b"BITCODE")
    cache, log = CacheStore(tmp_path / "cache"), tmp_path / "backend.log"
    one, two = _job(compiler, tmp_path, "app"), _job(compiler, tmp_path, "tool")
    assert cache_key(one) == cache_key(two)  # paths are not part of the key
    assert run(one, cache, log) == 0 and run(two, cache, log) == 0
    assert (tmp_path / "runs").read_text().count("run") == 1
    assert (tmp_path / "tool/a.native.o").read_bytes() == b"native(BITCODE)"
    assert read_stats(log) == read_stats(log, 0) and (read_stats(log).hits, read_stats(log).misses) == (1, 1)


def test_key_covers_bitcode_index_and_flags(tmp_path: Path, compiler: Path) -> None:
    (tmp_path / "a.o").write_bytes(b"BITCODE")
    job = _job(compiler, tmp_path, "app")
    key = cache_key(job)
    Path(job.index).write_bytes(b"OTHER INDEX")
    assert cache_key(job) != key
    Path(job.index).write_bytes(b"INDEX")
    assert cache_key(BackendJob.parse([*job.argv, "-mllvm", "-x"])) != key
    (tmp_path / "a.o").write_bytes(b"BITCODE2")
    assert cache_key(job) != key


def test_unchanged_output_keeps_its_mtime(tmp_path: Path, compiler: Path) -> None:
    (tmp_path / "a.o").write_bytes(b"BITCODE")
    cache, log = CacheStore(tmp_path / "cache"), tmp_path / "backend.log"
    job = _job(compiler, tmp_path, "app")
    run(job, cache, log)
    out = Path(job.output)
    os.utime(out, (1, 1))
    run(job, cache, log)  # a hit with identical content: not rewritten (restat sees no change)
    assert out.stat().st_mtime == 1
    assert read_stats(log, 0).hits == 1 and read_stats(tmp_path / "missing.log").hits == 0


def test_parse_rejects_non_backend_commands() -> None:
    with pytest.raises(ValueError, match="not a backend command"):
        BackendJob.parse(["clang", "-c", "x.cc"])


def test_launched_jobs_run_once_under_a_path_named_by_their_content(
    tmp_path: Path, compiler: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Remote misses: identical jobs of two links are one launch, with index and output paths that depend only
    on the job's content (so they are one REAPI action in every build directory)."""
    monkeypatch.chdir(tmp_path)
    launcher = tmp_path / "launcher"
    launcher.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/launched\nwhile [ "$1" != "--" ]; do shift; done\nshift\nexec "$@"\n')
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "a.o").write_bytes(b"BITCODE")
    cache, log = CacheStore(tmp_path / "cache"), tmp_path / "backend.log"
    one, two = _job(compiler, tmp_path, "app"), _job(compiler, tmp_path, "tool")
    assert content_key(one) == content_key(two)
    for job in (one, two):
        assert run(job, cache, log, [str(launcher), "--remote", "x", "--"]) == 0
    launched = (tmp_path / "launched").read_text().splitlines()
    stage = f"gn-thinlto/remote-stage/{content_key(one)}"
    assert len(launched) == 1 and f"-o {stage}/native.o" in launched[0]
    assert f"-fthinlto-index={stage}/index.thinlto.bc" in launched[0] and str(tmp_path / "a.o") in launched[0]
    assert (tmp_path / "app/a.native.o").read_bytes() == (tmp_path / "tool/a.native.o").read_bytes() == b"native(BITCODE)"
    assert sorted(p.name for p in (tmp_path / stage).iterdir()) == [".lock"]


def test_a_launched_rerun_finds_its_previous_object_staged(
    tmp_path: Path, compiler: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A backend that reruns because its index changed: the object it wrote last time is copied where the remote
    action writes, so the remote client finds the bytes in place and brings nothing down. A stand-in is not
    staged, and what the action writes there never reaches the build's output through a link."""
    monkeypatch.chdir(tmp_path)
    launcher = tmp_path / "launcher"  # records what lay at -o when it started, then runs the command
    launcher.write_text('#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift\n'
                        'for a in "$@"; do [ "$prev" = -o ] && { cat "$a" 2>/dev/null || echo none; } '
                        f'>> {tmp_path}/staged; prev="$a"; done\nexec "$@"\n')
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "a.o").write_bytes(b"BITCODE")
    job = _job(compiler, tmp_path, "app")
    out, remote = Path(job.output), [str(launcher), "--remote", "x", "--"]
    assert run(job, CacheStore(tmp_path / "cache"), tmp_path / "log", remote) == 0
    os.utime(out, (1, 1))
    Path(job.index).write_bytes(b"INDEX 2")  # the rerun: another content key, the same object
    assert run(job, CacheStore(tmp_path / "cache"), tmp_path / "log", remote) == 0
    Path(job.index).write_bytes(b"INDEX 3")
    out.write_bytes(remote_stub.Stub("ab" * 32, 9, False, "grpc://h:1", "").text())
    assert run(job, CacheStore(tmp_path / "cache"), tmp_path / "log", remote) == 0
    assert (tmp_path / "staged").read_text() == "none\nnative(BITCODE)none\n"
    out.write_bytes(b"native(BITCODE)")
    os.utime(out, (1, 1))
    Path(job.index).write_bytes(b"INDEX 4")
    assert run(job, CacheStore(tmp_path / "cache"), tmp_path / "log", remote) == 0
    assert out.read_bytes() == b"native(BITCODE)" and out.stat().st_mtime == 1  # restat: unchanged


def test_staging_the_previous_object_is_best_effort(tmp_path: Path) -> None:
    """Whatever lies at the output (a FIFO, a link, nothing) or at the stage (a late write of an abandoned
    action), staging neither fails the step nor blocks; a copy it could not make is not left behind."""
    from gn_thinlto.steps.backend import _stage_previous

    out, staged = tmp_path / "x.o", tmp_path / "native.o"
    os.mkfifo(out)
    (tmp_path / "y.o").symlink_to(tmp_path / "elsewhere.o")
    (tmp_path / "elsewhere.o").write_bytes(b"OBJECT")
    _stage_previous({"o": str(out), "dwo": str(tmp_path / "y.o")}, {"o": str(staged), "dwo": str(tmp_path / "s.dwo")})
    assert not staged.exists() and not (tmp_path / "s.dwo").exists()
    out.unlink()
    out.write_bytes(b"OBJECT")
    staged.write_bytes(b"LATE")
    _stage_previous({"o": str(out)}, {"o": str(staged)})
    assert not staged.exists()
    _stage_previous({"o": str(out)}, {"o": str(staged)})
    assert staged.read_bytes() == b"OBJECT" and not staged.samefile(out)


def test_without_the_cache_every_job_runs_the_compiler(tmp_path: Path, compiler: Path) -> None:
    """`backend_cache: false` (sharing off): identical jobs of two links both compile; outputs still restat."""
    (tmp_path / "a.o").write_bytes(b"BITCODE")
    cache, log = CacheStore(""), tmp_path / "backend.log"
    one, two = _job(compiler, tmp_path, "app"), _job(compiler, tmp_path, "tool")
    assert run(one, cache, log) == 0 and run(two, cache, log) == 0
    os.utime(two.output, (1, 1))
    assert run(two, cache, log) == 0
    assert (tmp_path / "runs").read_text().count("run") == 3
    assert Path(two.output).stat().st_mtime == 1 and read_stats(log).misses == 3
    assert not (tmp_path / "cache").exists()


def test_backend_command_line(tmp_path: Path) -> None:
    assert parse_args(["--no-cache", "--log", "l", "--", "clang", "-c"]) == StepArgs("", "l", [], ["clang", "-c"])
    assert parse_args(["--cache", "c", "--log", "l", "--policy", "cache_size=1%", "--trust", "ci,1001", "--launcher",
                       "--", "w", "--", "clang"]) == StepArgs("c", "l", ["w", "--"], ["clang"], "cache_size=1%",
                                                          ["ci", "1001"])
    assert parse_args(["--cache", "c", "--log", "l", "--socket", "s", "--", "clang"]).socket == "s"
    for bad in (["--log", "l", "--", "clang"], ["--cache", "c", "--log", "l", "--launcher", "--", "clang"],
                ["--frob", "--", "x"]):
        with pytest.raises(ValueError):
            parse_args(bad)


def test_split_dwarf_job_names_its_dwo_and_keys_on_its_output_path() -> None:
    argv = ["/llvm/clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=i.bc", "-o", "n/a.o", "-gsplit-dwarf"]
    job = BackendJob.parse(argv)
    assert job.dwo == "n/a.dwo"
    assert "n/a.o" in job.flags_for_key() and "<out>" not in job.flags_for_key()
    assert job.split_dwarf_args("t.dwo") == ("-Xclang", "-split-dwarf-file", "-Xclang", "n/a.dwo", "-Xclang",
                                             "-split-dwarf-output", "-Xclang", "t.dwo")
    single = BackendJob.parse([*argv[:-1], "-gsplit-dwarf=single"])
    # single: the object names itself (its final path, not a temporary one), so its path is part of the key
    assert single.dwo == "" and single.split_dwarf_args("t.dwo") == ("-Xclang", "-split-dwarf-file", "-Xclang",
                                                                     "n/a.o")
    assert "n/a.o" in single.flags_for_key() and "<out>" not in single.flags_for_key()


def test_under_single_file_split_dwarf_each_object_names_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """-gsplit-dwarf=single: the object holds its .dwo sections and names itself in DW_AT_dwo_name. The step
    compiles to a temporary file, and a cache hit serves another output's bytes: both used to name the wrong file
    (a deleted temporary, or the other output)."""
    import re
    import subprocess

    (tmp_path / "a.c").write_text("int f(int x) { return x * 3; }\nint main(void) { return f(2); }\n")
    subprocess.run(["clang-19", "-g", "-O2", "-flto=thin", "-c", "a.c", "-o", "a.o"], cwd=tmp_path, check=True)
    subprocess.run(["clang-19", "-fuse-ld=lld", "-flto=thin", "-Wl,--thinlto-index-only", "a.o", "-o", "prog"],
                   cwd=tmp_path, check=True)
    monkeypatch.chdir(tmp_path)  # the index names the module as the thin link saw it: a.o
    cache, log = CacheStore(tmp_path / "cache"), tmp_path / "backend.log"
    for target in ("d1", "d2"):
        (tmp_path / target).mkdir()
        out = f"{target}/a.native.o"
        job = BackendJob.parse(["clang-19", "-c", "-O2", "-g", "-gsplit-dwarf=single", "-x", "ir", "a.o",
                                "-fthinlto-index=a.o.thinlto.bc", "-o", out])
        assert run(job, cache, log) == 0
        dump = subprocess.run(["/usr/lib/llvm-19/bin/llvm-dwarfdump", "--debug-info", out],
                              capture_output=True, text=True, check=True).stdout
        assert set(re.findall(r'DW_AT_dwo_name\s+\("([^"]*)"\)', dump)) == {out}, dump


def test_the_key_covers_the_files_the_flags_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample profile or a basic-block sections list edited between two builds: the flags (paths) stay, the
    object changes. The key used to cover only the path, and served the object built from the old file."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.o", "a.o.thinlto.bc"):
        Path(name).write_bytes(b"x")
    Path("prof.txt").write_text("foo:1:1\n")
    Path("list.txt").write_text("!foo\n")
    job = BackendJob.parse(["clang-19", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "n.o",
                            "-fprofile-sample-use=prof.txt", "-fbasic-block-sections=list=list.txt"])
    assert job.flag_files() == [("-fprofile-sample-use=prof.txt", "prof.txt"),
                                ("-fbasic-block-sections=list=list.txt", "list.txt")]
    first = content_key(job)
    Path("list.txt").write_text("!bar\n")
    second = content_key(job)
    Path("prof.txt").write_text("bar:1:1\n")
    assert len({first, second, content_key(job)}) == 3


def test_the_key_covers_separate_values_profile_directories_and_response_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An attacker's review (2026-12-07) found files a backend reads outside the key: `--config F`, a plugin
    loaded with `-Xclang -load -Xclang F`, `-fprofile-use=DIR` (its default.profdata), `-ivfsoverlay F`, and the
    files a response file names. Files the backend writes (a time trace) are not keyed: the key would change at
    every run."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.o", "a.o.thinlto.bc", "my.cfg", "plugin.so", "vfs.yaml", "s.prof", "tt.json", "n.dwo"):
        Path(name).write_bytes(b"x")
    Path("pgo").mkdir()
    Path("pgo/default.profdata").write_bytes(b"p")
    Path("flags.rsp").write_text("-O2 -fprofile-sample-use=s.prof\n")
    job = BackendJob.parse(["clang-19", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "n.o",
                            "--config", "./my.cfg", "-Xclang", "-load", "-Xclang", "plugin.so", "-fprofile-use=pgo",
                            "-ivfsoverlay", "vfs.yaml", "@flags.rsp", "-ftime-trace=tt.json",
                            "-Xclang", "-split-dwarf-output", "-Xclang", "n.dwo"])
    assert job.flag_files() == [("@flags.rsp", "flags.rsp"), ("--config", "./my.cfg"), ("plugin.so", "plugin.so"),
                                ("-fprofile-use=pgo", "pgo/default.profdata"), ("vfs.yaml", "vfs.yaml"),
                                ("-fprofile-sample-use=s.prof", "s.prof")]
    keys = {content_key(job)}
    for name in ("my.cfg", "plugin.so", "pgo/default.profdata", "vfs.yaml", "s.prof"):
        Path(name).write_bytes(b"changed")
        keys.add(content_key(job))
    Path("tt.json").write_bytes(b"a new trace")
    keys.add(content_key(job))
    assert len(keys) == 6  # one per read file's change, none for the trace


def test_remote_inputs_are_the_files_the_key_covers(tmp_path: Path) -> None:
    """The same files travel with the remote action, so a remote backend reads them, not the worker's (or none,
    when a plugin was missing and the remote compile failed without a local fallback)."""
    from goma_ext.inputs.backend import backend_inputs

    for name in ("a.o", "plugin.so", "my.cfg", "tt.json"):
        (tmp_path / name).write_bytes(b"x")
    result = backend_inputs(["clang-19", "-c", "-x", "ir", "a.o", "-o", "n.o", "-Xclang", "-load", "-Xclang",
                             "plugin.so", "--config", "my.cfg", "-ftime-trace=tt.json"], tmp_path)
    assert result.other_inputs == ("my.cfg", "plugin.so")


def test_a_native_cpu_is_in_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-march=native (copied from a link line) builds for the machine's CPU: the key names that CPU, so a cache
    shared by machines with other CPUs never serves one's object to another."""
    from thinlto_base import keys

    base = ["clang-19", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "n.o"]
    assert not any(f.startswith("<native cpu>") for f in BackendJob.parse(base).flags_for_key())
    native = BackendJob.parse([*base, "-march=native"]).flags_for_key()
    assert native[-1] == f"<native cpu>{keys.host_cpu()}" and len(keys.host_cpu()) == 64
    monkeypatch.setattr(keys, "_HOST_CPU", ["another cpu"])
    assert BackendJob.parse([*base, "-march=native"]).flags_for_key() != native


def test_configuration_files_and_native_cpus_inside_response_files_are_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A review of 87e5739: `@G` inside a --config file (relative to its directory) was neither keyed nor
    checked, and -march=native inside a response or configuration file left the CPU out of the key."""
    from thinlto_base import keys

    monkeypatch.chdir(tmp_path)
    Path("a.o").write_bytes(b"bitcode")
    Path("cfgd").mkdir()
    Path("cfgd/outer.cfg").write_text("# options of ours\n@inner.cfg\n")
    Path("cfgd/inner.cfg").write_text("-O0\n")
    Path("native.rsp").write_text("-march=native\n")
    base = ["clang-19", "-c", "-x", "ir", "a.o", "-o", "n.o"]
    job = BackendJob.parse([*base, "--config=cfgd/outer.cfg"])
    assert job.flag_files() == [("--config=cfgd/outer.cfg", "cfgd/outer.cfg"), ("@inner.cfg", "cfgd/inner.cfg")]
    before = content_key(job)
    Path("cfgd/inner.cfg").write_text("-O2 -mavx512f\n")
    assert content_key(job) != before
    for extra in (["@native.rsp"], ["--config=./native.rsp"], ["-mcpu=native+crc"]):
        assert BackendJob.parse([*base, *extra]).flags_for_key()[-1] == f"<native cpu>{keys.host_cpu()}", extra


def test_a_hash_sign_is_a_comment_in_configuration_files_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """clang reads `#` lines as comments in configuration files, never in response files: a word after `#` in a
    response file is a flag clang applies."""
    from thinlto_base import keys

    monkeypatch.chdir(tmp_path)
    Path("a.rsp").write_text("-DX #y -march=native\n")
    Path("a.cfg").write_text("# -march=native\n  # also a comment\n-O2\n")
    base = ["clang-19", "-c", "-x", "ir", "a.o", "-o", "n.o"]
    assert BackendJob.parse([*base, "@a.rsp"]).words()[-3:] == ["-DX", "#y", "-march=native"]
    assert BackendJob.parse([*base, "--config=./a.cfg"]).words()[-1:] == ["-O2"]
    assert keys.native_cpu_flag(BackendJob.parse([*base, "@a.rsp"]).words()) == "-march=native"


@pytest.mark.parametrize(("text", "words"), [
    ("-march=native -DMSG=it's\n", ["-march=native", "-DMSG=its\n"]),  # a quote runs to the end, no failure
    ('-DA="x y" -DB=\\"z\n', ["-DA=x y", '-DB="z']),
    ("a\\ b 'c\\'d' \"\" e", ["a b", "c'd", "e"]),  # an empty quoted word is no word, as in clang
])
def test_response_files_split_as_clang_splits_them(text: str, words: list[str]) -> None:
    from thinlto_base.keys import tokenize_gnu

    assert tokenize_gnu(text) == words


def test_configuration_files_are_found_and_nested_as_clang_does(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A review of f4805fa (each checked against clang-19 -###): --config inside a configuration file, relative
    to it; @files nested in a configuration file's @file, relative to the file naming them; a bare name in
    --config-user-dir, and beside the compiler's unresolved path under -no-canonical-prefixes; a response file
    with an unbalanced quote."""
    from thinlto_base import keys

    monkeypatch.chdir(tmp_path)
    files = {"nest/top.cfg": "--config=sub/leaf.cfg\n", "nest/sub/leaf.cfg": "-march=native\n",
             "cfgd/c2.cfg": "@sub/r1.rsp\n", "cfgd/sub/r1.rsp": "@r2.rsp\n", "cfgd/sub/r2.rsp": "-march=native\n",
             "cfgd/r2.rsp": "-DWRONG\n", "ud/n.cfg": "-march=native\n", "bin/x.cfg": "-march=native\n",
             "apos.rsp": "-march=native -DMSG=it's\n"}
    for name, text in files.items():
        Path(name).parent.mkdir(parents=True, exist_ok=True)
        Path(name).write_text(text)
    Path("bin/clang-19").symlink_to(shutil.which("clang-19") or "/usr/bin/clang-19")
    base = ["clang-19", "-c", "-x", "ir", "a.o", "-o", "n.o"]
    for extra, read in ((["--config=nest/top.cfg"], "nest/sub/leaf.cfg"), (["--config=cfgd/c2.cfg"], "cfgd/sub/r2.rsp"),
                        (["--config-user-dir=ud", "--config=n.cfg"], "ud/n.cfg"), (["@apos.rsp"], "apos.rsp")):
        job = BackendJob.parse([*base, *extra])
        assert keys.native_cpu_flag(job.words()) == "-march=native", extra
        assert read in [path for _arg, path in job.flag_files()], extra
        assert "-DWRONG" not in job.words()
    moved = BackendJob.parse(["bin/clang-19", *base[1:], "-no-canonical-prefixes", "--config=x.cfg"])
    assert keys.native_cpu_flag(moved.words()) == "-march=native"


def test_default_configuration_files_and_clangs_reading_rules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A review of 9b61f02, each case checked against clang-19 -###: clang loads `<triple>-clang.cfg` and the like
    beside itself without being asked; comments end at a line end, a backslash takes the next character along;
    byte order marks; <CFGDIR>; a NUL ends a word; Windows quoting is not read here, so such a job is not cached."""
    from thinlto_base import keys

    monkeypatch.chdir(tmp_path)
    Path("bin").mkdir()
    shutil.copy(os.path.realpath(shutil.which("clang-19") or "/usr/bin/clang-19"), "bin/clang")
    Path("bin/x86_64-pc-linux-gnu-clang.cfg").write_text("-march=native\n-fno-integrated-as\n")
    job = BackendJob.parse(["bin/clang", "-c", "-x", "ir", "a.o", "-o", "n.o"])
    assert keys.native_cpu_flag(job.words()) == "-march=native" and not job.cacheable()
    assert BackendJob.parse(["bin/clang", "-c", "-x", "ir", "a.o", "-o", "n.o", "--no-default-config"]).cacheable()
    assert keys.tokenize_config("# see \\\n-march=native\n") == ["-march=native"]
    assert keys.tokenize_config("-DX=a\\\\\n-march=native\n") == ["-DX=a\\", "-march=native"]
    assert keys.tokenize_config("-D\r#x -march=native\n") == ["-D", "#x", "-march=native"]
    files = {"bom.rsp": b"\xef\xbb\xbf-march=native\n", "u16.rsp": "-march=native\n".encode("utf-16"),
             "nul.rsp": b"-march=native\0junk\n", "cfgdir.cfg": b"-fprofile-sample-use=<CFGDIR>/prof.txt\n",
             "prof.txt": b"p"}
    for name, data in files.items():
        Path(name).write_bytes(data)
    base = ["clang-19", "-c", "-x", "ir", "a.o", "-o", "n.o"]
    for name in ("bom.rsp", "u16.rsp", "nul.rsp"):
        assert keys.native_cpu_flag(BackendJob.parse([*base, f"@{name}"]).words()) == "-march=native", name
    cfg = BackendJob.parse([*base, "--config=./cfgdir.cfg"])
    assert f"{tmp_path}/prof.txt" in [path for _arg, path in cfg.flag_files()]
    assert not BackendJob.parse([*base, "--rsp-quoting=windows"]).cacheable()


def test_an_empty_object_in_the_cache_is_never_served(tmp_path: Path) -> None:
    """An entry stored before the steps refused empty objects (clang's backend leaves one after an error it only
    prints) is a miss."""
    from thinlto_base.store import fetch_outputs, store_outputs

    store = CacheStore(str(tmp_path / "cache"), Trust(""))
    store_outputs(store, "k" * 64, {"o": b""})
    assert not fetch_outputs(store, "k" * 64, {"o": str(tmp_path / "n.o")}) and not (tmp_path / "n.o").exists()
    store_outputs(store, "j" * 64, {"o": b"object"})
    assert fetch_outputs(store, "j" * 64, {"o": str(tmp_path / "n.o")})
