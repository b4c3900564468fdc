"""Fuzzing every command of `gn-thinlto` and `goma-ext` with files they cannot use: missing, directories,
binary, non-UTF-8, empty, garbage YAML, 100,000-deep JSON, symlink loops, names too long or undecodable, a file
that fails to read (/proc/self/mem); and the files of a built directory (project state, .ninja_log, backend and
stats logs, manifests, index files) mutated. Every run ends in exit 0, or exit 2 with one line starting with
the program's name (`cluster status` also exits 1: the cluster is not up).

Nothing here reaches a server or runs gn or ninja: GOMA_EXT_REMOTE=off, GN and NINJA name missing tools.
Counts, and the distinct breaches (by exception and innermost project frame) each found before the fixes of
[trust] item 5; after: none.

- test_fuzz_cli_bad_file_arguments: every command below × every kind of bad path (fuzz_support.bad_paths),
  512 runs; 27 crashes (OSError ENAMETOOLONG, FileExistsError, NotADirectoryError, IsADirectoryError, and
  RuntimeError from a symlink loop, in gen, example, explain, cache, trace, report, run and cluster; those
  of cache and cluster were fixed in 199d53c by the change that owns them).
- test_fuzz_built_directory_files: seed 8, 400 inputs; 17: manifests not JSON, too deep or with a wrong type
  (JSONDecodeError, RecursionError, AttributeError, TypeError), files not UTF-8 (UnicodeDecodeError in
  explain, trace, report, cache stats, the hook's check and the backend log's reader), a torn .ninja_log line
  (ValueError), and `report` saying `report: error:` instead of the program's name.
- test_console_says_one_line: 9 commands run as the console, GN and ninja run them; `goma-ext worker` with a
  --work-dir that is a file (NotADirectoryError) and with --count 0 (a supervisor of nothing, forever) were
  found by hand (a worker given a reachable endpoint runs until stopped, so the fuzzers give it none).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from gn_thinlto import hook
from gn_thinlto.analysis import build_html
from gn_thinlto.cli import main as gn_thinlto_cli
from gn_thinlto.steps import thinlink
from goma_ext import cli as goma_ext_cli
from goma_ext.remote import records
from tests import budget

from .fuzz_support import DEEP, Findings, Outcome, assert_one_line_error, bad_paths, call, mutate_bytes, mutations
from .test_plan import BASIC_GN

Main = Callable[[list[str]], int]
P = "{}"  # where the bad path goes
BACKEND = ["clang", "-c", "-x", "ir", "a.o", "-fthinlto-index=a.o.thinlto.bc", "-o", "a.native.o"]
# (program, its main, the command with P for the bad path); no command here can start a server or delete.
COMMANDS: tuple[tuple[str, Main, tuple[str, ...]], ...] = (
    ("gn-thinlto", gn_thinlto_cli.main, ("gen", P, "--root", "root")),
    ("gn-thinlto", gn_thinlto_cli.main, ("gen", "out-gen", "--root", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("gen", "out-gen", "--root", "root", "--config", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("example", "--root", P, "--out", "out-example")),
    ("gn-thinlto", gn_thinlto_cli.main, ("example", "--root", "root", "--out", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("explain", P, "//app:app")),
    ("gn-thinlto", gn_thinlto_cli.main, ("explain", "built", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("cache", "stats", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("cache", "stats", "--cache", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("cache", "verify", "--cache", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("trace", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("trace", "built", "-o", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("report", P)),
    ("gn-thinlto", gn_thinlto_cli.main, ("report", P, "--build")),
    ("gn-thinlto", gn_thinlto_cli.main, ("report", "built", "--html", P)),
    ("goma-ext", goma_ext_cli.main, ("index", P)),
    ("goma-ext", goma_ext_cli.main, ("index", P, "--json")),
    ("goma-ext", goma_ext_cli.main, ("inputs", "--cwd", P, "--", *BACKEND)),
    ("goma-ext", goma_ext_cli.main, ("inputs", "--", "clang", "-c", "-x", "ir", P, f"-fthinlto-index={P}", "-o", "x")),
    ("goma-ext", goma_ext_cli.main, ("inputs", "--", "clang", f"@{P}")),
    ("goma-ext", goma_ext_cli.main, ("run", "--config", P, "--", "true")),
    ("goma-ext", goma_ext_cli.main, ("run", "--naive-inputs", P, "--", "true")),
    ("goma-ext", goma_ext_cli.main, ("run", "--", P)),
    ("goma-ext", goma_ext_cli.main, ("worker", "--remote", "http://bad", "--work-dir", P, "--index", "0")),
    ("goma-ext", goma_ext_cli.main, ("cluster", "status", "--state", P)),
    ("goma-ext", goma_ext_cli.main, ("report", P)),
    ("goma-ext", goma_ext_cli.main, ("report", P, "--dtlto")),
    ("goma-ext", goma_ext_cli.main, ("dtlto", "--no-cache", P)),
    ("goma-ext", goma_ext_cli.main, ("dtlto", "--no-cache", "--config", P, "job.json")),
    ("goma-ext", goma_ext_cli.main, ("proxy", "status", "--config", P)),
    ("goma-ext", goma_ext_cli.main, ("proxy", "start", "--config", P)),
    ("goma-ext", goma_ext_cli.main, ("proxy", "serve", "--config", P)),
)
STATE_LOG = "gn_thinlto_remote.jsonl"
NINJA_LOG = (
    "# ninja log v5\n"
    "0\t120\t1\tobj/app/app.main.o\t1a\n"
    "130\t400\t2\tgn-thinlto/app/used.txt\t2b\n"
    "130\t400\t2\tgn-thinlto/app/final.dd\t2b\n"
    "410\t900\t3\tgn-thinlto/app/native/obj/app/app.main.o\t3c\n"
    "910\t1000\t4\tapp\t4d\n"
)


def ok_codes(command: Sequence[str]) -> tuple[int, ...]:
    return (0, 1, 2) if command[:2] == ("cluster", "status") else (0, 2)


def _isolate(monkeypatch: pytest.MonkeyPatch, work: Path) -> None:
    """WORK as the working directory, no servers and no gn or ninja, XDG directories of WORK's own."""
    monkeypatch.chdir(work)
    for name, value in (("GOMA_EXT_REMOTE", "off"), ("GN", "gn-fuzz-missing"), ("NINJA", "ninja-fuzz-missing"),
                        ("XDG_CONFIG_HOME", str(work / "xdg")), ("XDG_CACHE_HOME", str(work / "xdg")),
                        ("XDG_RUNTIME_DIR", str(work / "xdg"))):
        monkeypatch.setenv(name, value)
    for name in ("GOMA_EXT_DTLTO", "GOMA_EXT_DTLTO_CONFIG"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a GN root, no servers and no gn or ninja."""
    _isolate(monkeypatch, tmp_path)
    (tmp_path / "root").mkdir()
    (tmp_path / "root/.gn").write_text('buildconfig = "//BUILDCONFIG.gn"\nscript_executable = "python3"\n')
    return tmp_path


@pytest.fixture(scope="module")
def built_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """_build_dir's directory, made once for the module (in the same environment as env's) and copied by
    build_dir for each test: the hook compiles the step launcher for each new directory, since an XDG cache
    under /tmp is not one it may keep launchers in (~0.4 CPU s a time, most of a regression test's cost)."""
    work = tmp_path_factory.mktemp("built-template")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _isolate(monkeypatch, work)
        return _build_dir(work / "built")


def build_dir(out: Path, template: Path) -> Path:
    """OUT as _build_dir leaves it: a copy of TEMPLATE (built_template), file times kept."""
    shutil.copytree(template, out, symlinks=True)
    return out


def _build_dir(out: Path) -> Path:
    """OUT as GN and the hook left it, and as a build leaves it: logs, thin-link lists, (empty) index files."""
    shutil.copytree(BASIC_GN, out)
    hook.run_hook(out / "project.json", None, "/py")
    m = json.loads((out / "gn-thinlto/app/thinlink.json").read_text())
    (out / m["used_list"]).write_text("".join(f"{b}\n" for b in m["bitcode"][:2]))
    for bitcode in m["bitcode"]:
        index = out / m["index_dir"] / f"{bitcode}.thinlto.bc"
        index.parent.mkdir(parents=True, exist_ok=True)
        index.write_bytes(b"")
    (out / ".ninja_log").write_text(NINJA_LOG)
    (out / "gn-thinlto/backend.log").write_text("miss 3c gn-thinlto/app/native/obj/app/app.main.o\n")
    (out / STATE_LOG).write_text(records.line("gn-thinlto/app/native/obj/app/app.main.o", "local", 0, 0.4) + "\n")
    return out


def run(main: Main, argv: Sequence[str]) -> Outcome:
    return call(main, list(argv))


def test_fuzz_cli_bad_file_arguments(env: Path, built_template: Path) -> None:
    build_dir(env / "built", built_template)
    (env / "job.json").write_text("{}")
    bad = bad_paths(env)
    findings = Findings()
    for prog, main, command in COMMANDS:
        for kind, path in sorted(bad.items()):
            argv = [a.replace(P, path) for a in command]
            findings.check(run(main, argv), prog, f"{prog} {' '.join(command)} with {kind}", ok_codes(command))
    findings.assert_none()


# The built directory's files and how each is mutated: JSON by value, anything by bytes.
BUILT_FILES = ("gn-thinlto/app/thinlink.json", ".ninja_log", "gn-thinlto/backend.log", STATE_LOG, "build.ninja",
               "gn-thinlto/app/used.txt", "gn-thinlto/app/index/obj/app/app.main.o.thinlto.bc",
               "gn-thinlto/rules.ninja")
BUILT_COMMANDS: tuple[tuple[str, Main, tuple[str, ...]], ...] = (
    ("gn-thinlto", gn_thinlto_cli.main, ("explain", "OUT", "//app:app")),
    ("gn-thinlto", gn_thinlto_cli.main, ("trace", "OUT")),
    ("gn-thinlto", gn_thinlto_cli.main, ("report", "OUT")),
    ("gn-thinlto", gn_thinlto_cli.main, ("report", "OUT", "--json", "--build")),
    ("gn-thinlto", gn_thinlto_cli.main, ("cache", "stats", "OUT")),
    ("goma-ext", goma_ext_cli.main, ("report", "OUT")),
)


def _mutant(rng: random.Random, seed: int, original: bytes) -> tuple[bytes, str]:
    """One mutant of ORIGINAL: by JSON value when it is JSON (each line of a JSON-lines log), else by bytes."""
    try:
        doc: Any = json.loads(original)
    except ValueError:
        return mutate_bytes(rng, original)
    if rng.random() < 0.3:
        return mutate_bytes(rng, original)
    return next(mutations(seed, 1, doc, byte_share=0.0))


def test_fuzz_built_directory_files(env: Path, built_template: Path) -> None:
    out = build_dir(env / "built", built_template)
    originals = {rel: (out / rel).read_bytes() for rel in BUILT_FILES}
    rng = random.Random(8)
    findings = Findings()
    for _ in range(budget.cases(400)):
        rel = rng.choice(BUILT_FILES)
        data, what = _mutant(rng, rng.randrange(1 << 30), originals[rel])
        (out / rel).write_bytes(data)
        prog, main, command = rng.choice(BUILT_COMMANDS)
        argv = [str(out) if a == "OUT" else a for a in command]
        findings.check(run(main, argv), prog, f"{' '.join(command)} with {rel}: {what}")
        (out / rel).write_bytes(originals[rel])
    findings.assert_none()


# Regression tests: one per distinct crash the fuzzers found, and the message now given instead.
CLI_REGRESSIONS: tuple[tuple[str, str, str], ...] = (
    # (command, with P for the bad path; the kind of bad path (bad_paths); what the one line says)
    ("gn-thinlto example --root root --out {}", "binary", "--out bad/binary: File exists"),
    ("gn-thinlto gen {} --root root", "binary", "build directory bad/binary: File exists"),
    ("gn-thinlto report built --html {}", "directory", "--html bad: Is a directory"),
    ("gn-thinlto trace built -o {}", "directory", "-o bad: Is a directory"),
    ("gn-thinlto example --root root --out {}", "under-a-file", "--out bad/binary/x: Not a directory"),
    ("gn-thinlto gen {} --root root", "under-a-file", "build directory bad/binary/x: Not a directory"),
    ("gn-thinlto report built --html {}", "under-a-file", "--html bad/binary/x: Not a directory"),
    ("gn-thinlto trace built -o {}", "under-a-file", "-o bad/binary/x: Not a directory"),
    ("gn-thinlto report {}", "binary", "cannot read the stats log: Not a directory"),
    ("gn-thinlto example --root {} --out out-example", "long-component-chain", "File name too long"),
    ("gn-thinlto example --root root --out {}", "long-component-chain", "File name too long"),
    ("gn-thinlto gen out-gen --root {}", "long-component-chain", "File name too long"),
    ("gn-thinlto gen out-gen --root root --config {}", "long-component-chain", "File name too long"),
    ("gn-thinlto gen {} --root root", "long-component-chain", "File name too long"),
    ("gn-thinlto report built --html {}", "long-component-chain", "File name too long"),
    ("gn-thinlto trace {}", "long-component-chain", "File name too long"),
    ("gn-thinlto trace built -o {}", "long-component-chain", "File name too long"),
    ("gn-thinlto explain {} //app:app", "long-component-chain", "File name too long"),
    ("gn-thinlto report {}", "long-component-chain", "File name too long"),
    ("gn-thinlto example --root {} --out out-example", "symlink-loop", "Too many levels of symbolic links"),
    ("goma-ext run --config {} -- true", "long-component-chain", "File name too long"),
    ("gn-thinlto cache stats {}", "binary", "Not a directory"),
    ("gn-thinlto cache stats {}", "long-component-chain", "File name too long"),
    ("gn-thinlto cache stats --cache {}", "long-component-chain", "File name too long"),
    ("gn-thinlto cache verify --cache {}", "long-component-chain", "File name too long"),
    ("goma-ext cluster status --state {}", "long-component-chain", "File name too long"),
    ("goma-ext cluster status --state {}", "symlink-loop", "bad/loop"),
)


def test_report_html_fails_on_its_path_before_drawing(env: Path, built_template: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A --html path that cannot be written is the one-line error before any plot is drawn (matplotlib's two PNGs
    took most of the fuzzer's time on such paths); a good one gets the page with the plots."""
    build_dir(env / "built", built_template)
    drawn: list[object] = []
    monkeypatch.setattr(build_html, "plots", lambda *args: drawn.append(args))
    outcome = run(gn_thinlto_cli.main, ["report", "built", "--html", "missing/report.html"])
    assert_one_line_error(outcome, "gn-thinlto: ", "--html missing/report.html: No such file or directory")
    assert drawn == []
    outcome = run(gn_thinlto_cli.main, ["report", "built", "--html", "report.html"])
    assert outcome.code == 0 and len(drawn) == 1 and "<html" in (env / "report.html").read_text()


@pytest.mark.parametrize(("command", "kind", "says"), CLI_REGRESSIONS,
                         ids=[f"{c} with {k}" for c, k, _ in CLI_REGRESSIONS])
def test_cli_regressions(env: Path, built_template: Path, command: str, kind: str, says: str) -> None:
    build_dir(env / "built", built_template)
    bad = {k: os.path.relpath(p, env) if p.startswith(str(env)) else p for k, p in bad_paths(env).items()}
    prog, *words = command.split()
    main = gn_thinlto_cli.main if prog == "gn-thinlto" else goma_ext_cli.main
    assert_one_line_error(run(main, [w.replace(P, bad[kind]) for w in words]), prog, says)


BUILT_REGRESSIONS: tuple[tuple[str, str, Callable[[bytes], bytes], str], ...] = (
    # (command on OUT, the file changed, how, what the one line says)
    ("explain OUT //app:app", "gn-thinlto/app/thinlink.json", lambda b: b[:328] + b"," + b[328:], "not JSON"),
    ("report OUT --json --build", "gn-thinlto/app/thinlink.json", lambda b: b[:769] + b[777:], "not JSON"),
    ("report OUT --json --build", "gn-thinlto/rules.ninja", lambda b: b[:75] + b"\xb0" + b[76:], ""),
    ("explain OUT //app:app", "gn-thinlto/app/used.txt", lambda b: b + b"\xfe\xff", "not UTF-8 text"),
    ("report OUT --json --build", ".ninja_log", lambda b: b[:4] + b"\xed\xa0\x80" + b[4:], "not UTF-8 text"),
    ("report OUT --json --build", "gn-thinlto/backend.log", lambda b: b"\xb5" + b, "not UTF-8 text"),
    ("trace OUT", "gn-thinlto/app/thinlink.json", lambda b: b[:999] + b"\xfe\xff" + b[999:], "not UTF-8 text"),
    ("trace OUT", "gn-thinlto/app/used.txt", lambda b: b"\xed\xa0\x80" + b, "not UTF-8 text"),
    ("explain OUT //app:app", "build.ninja", lambda b: b[:69] + b"\x87" + b[70:], "not UTF-8 text"),
    ("report OUT", STATE_LOG, lambda b: b[:59] + b"\xd0" + b[60:], "cannot read the stats log: not UTF-8 text"),
    ("report OUT --json --build", ".ninja_log", lambda b: b.replace(b"\n0\t120", b"\n\x000\t120"), ""),
    ("report OUT", STATE_LOG, lambda b: b.replace(b'"wall_s": 0.4', b'"wall_s": {"v": 0.4}'), "not a stats record"),
    ("trace OUT", "gn-thinlto/app/thinlink.json",
     lambda b: b.replace(b'"final_output": "./app"', b'"final_output": []'), "final_output: not a string"),
    ("report OUT --json --build", "gn-thinlto/app/thinlink.json",
     lambda b: b.replace(b'"used_list": "gn-thinlto/app/used.txt"', b'"used_list": null'), "used_list: not a string"),
    ("report OUT --json --build", "gn-thinlto/app/thinlink.json",
     lambda b: b.replace(b'"bitcode": [', b'"bitcode": [' + b"[" * DEEP + b"]" * DEEP + b","), "nested too deeply"),
    ("report OUT --json --build", "build.ninja", lambda b: b[:607] + b"\xe2\x82" + b[607:], ""),
    ("cache stats OUT", "gn-thinlto/rules.ninja", lambda b: b[:115] + b"\xc3" + b[115:], "not UTF-8"),
    ("cache stats OUT", "gn-thinlto/backend.log", lambda b: b[:14] + b"\xe2\x82" + b[14:], ""),
    ("trace OUT", STATE_LOG, lambda b: b[:3] + b"\xed\xa0\x80" + b[3:], "cannot read the stats log: not UTF-8 text"),
)


@pytest.mark.parametrize(("command", "rel", "change", "says"), BUILT_REGRESSIONS,
                         ids=[f"{c} with {r} #{n}" for n, (c, r, _, _) in enumerate(BUILT_REGRESSIONS)])
def test_built_directory_regressions(env: Path, built_template: Path, command: str, rel: str,
                                     change: Callable[[bytes], bytes], says: str) -> None:
    out = build_dir(env / "built", built_template)
    (out / rel).write_bytes(change((out / rel).read_bytes()))
    outcome = run(gn_thinlto_cli.main, [str(out) if w == "OUT" else w for w in command.split()])
    if says:
        assert_one_line_error(outcome, "gn-thinlto", says)
    else:  # a damaged file the command can do without
        assert outcome.crash is None and outcome.code == 0, outcome


# The real console: the installed scripts and the build steps as ninja and GN start them, in new processes.
BIN = Path(sys.executable).parent
STEPS = Path(thinlink.__file__).parent


def _console_cases(env: Path) -> dict[str, tuple[list[str | bytes], str]]:
    """name: (command line, the start of its one stderr line)"""
    out = env / "gn-out"
    shutil.copytree(BASIC_GN, out)
    (out / "project.json").write_bytes(b"\xff" + (out / "project.json").read_bytes())
    (env / "deep.json").write_text("[" * DEEP + "]" * DEEP)
    return {
        "gn-thinlto-explain": ([str(BIN / "gn-thinlto"), "explain", str(env / "missing"), "//a:a"],
                               "gn-thinlto: error:"),
        "gn-thinlto-bad-option": ([str(BIN / "gn-thinlto"), "trace", "--bogus"], "gn-thinlto trace: error:"),
        "hook-non-UTF-8": ([sys.executable, "-m", "gn_thinlto.hook", str(out / "project.json")], "gn-thinlto: error:"),
        "thinlink-step-deep": ([sys.executable, "-S", str(STEPS / "thinlink.py"), str(env / "deep.json")],
                               "gn-thinlto: error:"),
        "dtlto-deep": ([str(BIN / "goma-ext"), "dtlto", "--no-cache", str(env / "deep.json")], "goma-ext: error:"),
        "dtlto-undecodable-name": ([str(BIN / "goma-ext"), "dtlto", "--no-cache", b"\xff.json"], "goma-ext: error:"),
        "goma-ext-index-directory": ([str(BIN / "goma-ext"), "index", str(env)], "goma-ext: error:"),
        # A worker stops on its --work-dir before it connects (the endpoint is never reached: nothing listens).
        "worker-work-dir-a-file": ([str(BIN / "goma-ext"), "worker", "--remote", "grpc://127.0.0.1:1", "--work-dir",
                                    str(BASIC_GN / "project.json"), "--index", "0"], "goma-ext: error: --work-dir"),
        "worker-no-workers": ([str(BIN / "goma-ext"), "worker", "--remote", "grpc://127.0.0.1:1", "--work-dir",
                               str(env / "work"), "--count", "0"], "goma-ext: error: --count 0"),
    }


@pytest.mark.parametrize("name", ["gn-thinlto-explain", "gn-thinlto-bad-option", "hook-non-UTF-8",
                                  "thinlink-step-deep", "dtlto-deep", "dtlto-undecodable-name",
                                  "goma-ext-index-directory", "worker-work-dir-a-file", "worker-no-workers"])
def test_console_says_one_line(env: Path, name: str) -> None:
    argv, prefix = _console_cases(env)[name]
    variables = {k: v for k, v in os.environ.items() if k != "GOMA_EXT_REMOTE"}  # the worker needs its --remote
    proc = subprocess.run(argv, capture_output=True, cwd=env, timeout=60, check=False,
                          env={**variables, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    err = proc.stderr.decode(errors="replace")
    assert proc.returncode == 2 and err.count("\n") == 1 and err.startswith(prefix), (proc.returncode, err)
