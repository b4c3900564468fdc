"""Fuzzing `goma-ext dtlto`, the distributor lld 22 runs: its JSON job file, its options and its config file.
Every run ends in exit 0, or exit 2 with one `goma-ext` line (exit 1 only when a compile itself failed).

The job file starts as LLVM 22 writes it (test_dtlto_jobfile.GOOD) in a directory holding its inputs, with a
fake compiler that writes the output it is given; remote execution is off, so a valid file runs both jobs
locally (every other input with the backend cache, in a directory of the test). Counts, and the distinct
crashes (by exception and innermost project frame) each found before the fixes of [trust] item 5; after: none.

- test_fuzz_dtlto_job_file: seed 5, 500 job files; 9 crashes: a missing or 5,000-character module stat()ed
  before any check (FileNotFoundError, OSError ENAMETOOLONG), a 5,000-character input (OSError in
  check_inputs), 100,000-deep nesting (RecursionError in json), lone surrogates and NUL bytes in arguments
  (UnicodeEncodeError and ValueError at three places of the distributor).
- test_fuzz_dtlto_arguments: seed 6, 300 command lines; 7: --config too long (OSError), --config deeply
  nested (RecursionError in YAML) or not UTF-8 (UnicodeDecodeError), a deep job file, --cache of 3,000
  components (RecursionError in os.makedirs), an unbalanced quote in $GOMA_EXT_DTLTO (ValueError), and a
  bad option value said on two lines (argparse's usage). By hand: --jobs 10**20 (OverflowError in slots).
"""

from __future__ import annotations

import copy
import json
import os
import random
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from goma_ext import cli
from tests import budget

from .fuzz_support import (
    DEEP,
    LONG_NAME,
    Findings,
    Outcome,
    assert_one_line_error,
    bad_paths,
    call,
    mutate_bytes,
    mutations,
)
from .test_dtlto_jobfile import GOOD

PREFIX = "goma-ext"
FAKE_COMPILER = ('#!/bin/sh\nout=\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                 '[ -n "$out" ] && printf object > "$out"\n')


@pytest.fixture
def link_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The link's working directory: GOOD's inputs, a fake compiler, no remote, no user config."""
    work = tmp_path / "link"
    work.mkdir()
    for job in GOOD["jobs"]:
        for name in job["inputs"]:
            (work / name).write_bytes(b"" if name.endswith(".thinlto.bc") else b"BC")  # empty: imports nothing
    compiler = work / "fake-clang"
    compiler.write_text(FAKE_COMPILER)
    compiler.chmod(compiler.stat().st_mode | stat.S_IXUSR)
    monkeypatch.chdir(work)
    monkeypatch.setenv("GOMA_EXT_REMOTE", "off")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    monkeypatch.delenv("GOMA_EXT_DTLTO", raising=False)
    monkeypatch.delenv("GOMA_EXT_DTLTO_CONFIG", raising=False)
    return work


def job_doc(work: Path) -> dict[str, Any]:
    doc = copy.deepcopy(GOOD)
    doc["common"]["args"][0] = str(work / "fake-clang")
    return doc


def dtlto(*argv: str, cache: bool = False) -> Outcome:
    return call(cli.main, ["dtlto", *(["--cache", "../cache"] if cache else ["--no-cache"]), *argv])


def test_fuzz_dtlto_job_file(link_dir: Path) -> None:
    job_file = link_dir / "app.dist.json"
    job_file.write_text(json.dumps(job_doc(link_dir)))
    assert dtlto(str(job_file)).code == 0, "the unmutated job file must run"
    assert dtlto(str(job_file), cache=True).code == 0, "… and be cached"
    findings = Findings()
    for n, (data, what) in enumerate(mutations(5, 500, job_doc(link_dir))):
        job_file.write_bytes(data)
        # exit 1: a job's compile failed (the fake compiler was given no -o); said on more than one line
        findings.check(dtlto(str(job_file), cache=n % 2 == 1), PREFIX, what, ok_codes=(0, 1, 2))
    findings.assert_none()


OPTIONS: dict[str, tuple[str, ...]] = {
    "--config": ("path",), "--jobs": ("0", "-1", "x", "99999999999999999999"), "--cache": ("path",),
    "--cache-policy": ("x", "cache_size=200%", "prune_interval=-1s", "\udcff"), "--stats-log": ("path",),
    "--slots-dir": ("path",), "--remote": ("", "http://a", "grpc://", "grpcs:///", "\udcff", LONG_NAME),
    "--instance": ("\udcff", LONG_NAME),
}
ENV_OPTIONS = ("--jobs=2 'unbalanced", "--bogus", "--jobs", "\udcff")


def _arguments(rng: random.Random, work: Path, bad: dict[str, str], job_file: str) -> tuple[list[str], str]:
    """A dtlto command line with one to three options given bad values, or a bad job file path."""
    argv: list[str] = []
    for option in rng.sample(sorted(OPTIONS), rng.randrange(0, 4)):
        value = rng.choice(OPTIONS[option])
        argv += [option, rng.choice(sorted(bad.values())) if value == "path" else value]
    last = job_file if argv and rng.random() < 0.7 else rng.choice(sorted(bad.values()))
    return [*argv, last], " ".join([*argv, last])[:160]


def test_fuzz_dtlto_arguments(link_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job_file = link_dir / "app.dist.json"
    job_file.write_text(json.dumps(job_doc(link_dir)))
    bad = bad_paths(link_dir)
    rng = random.Random(6)
    findings = Findings()
    for _ in range(budget.cases(300)):
        argv, what = _arguments(rng, link_dir, bad, str(job_file))
        if rng.random() < 0.1:
            monkeypatch.setenv("GOMA_EXT_DTLTO", rng.choice(ENV_OPTIONS))
            what += f" with GOMA_EXT_DTLTO={os.environ['GOMA_EXT_DTLTO']!r}"
        findings.check(call(cli.main, ["dtlto", *argv]), PREFIX, what)
        monkeypatch.delenv("GOMA_EXT_DTLTO", raising=False)
    findings.assert_none()


def _job_with(*path: str | int, value: Any) -> Callable[[Path], bytes]:
    """A job file: job_doc's with the value at PATH set to VALUE (appended when PATH ends in None)."""
    def make(work: Path) -> bytes:
        doc = job_doc(work)
        inner: Any = doc
        for key in path[:-1]:
            inner = inner[key]
        inner[path[-1]] = value
        return json.dumps(doc).encode()
    return make


# Regression tests: one per distinct crash the fuzzers found (the input that showed it first, made smaller), and
# the message now given instead.
JOB_REGRESSIONS: dict[str, tuple[Callable[[Path], bytes], str]] = {
    "missing-module": (_job_with("jobs", 0, "args", 0, value="sp ace$\n"), "input 'sp ace$\\n' does not exist"),
    "long-module-name": (_job_with("jobs", 0, "args", 0, value=LONG_NAME), "File name too long"),
    "long-input-name": (_job_with("jobs", 1, "inputs", 1, value=LONG_NAME), "File name too long"),
    "nested-100k-deep": (lambda work: ("[" * DEEP + "]" * DEEP).encode(), "nested too deeply"),
    "lone-surrogate-in-job-args": (_job_with("jobs", 1, "args", 0, value="\ud800"),
                                   "jobs[1].args[0]: '\\ud800' holds a NUL byte or a lone surrogate"),
    "lone-surrogate-in-common-args": (_job_with("common", "args", 3, value="\ud800"), "common.args[3]: '\\ud800'"),
    "nul-in-job-args": (_job_with("jobs", 1, "args", 0, value="nul\x00byte"), "jobs[1].args[0]: 'nul\\x00byte'"),
    "nul-in-common-args": (_job_with("common", "args", 1, value="nul\x00byte"), "common.args[1]"),
    "non-UTF-8": (lambda work: json.dumps(job_doc(work)).encode().replace(b"app", b"\xff", 1), "not UTF-8 text"),
}


@pytest.mark.parametrize("name", sorted(JOB_REGRESSIONS))
def test_job_file_regressions(link_dir: Path, name: str) -> None:
    make, says = JOB_REGRESSIONS[name]
    job_file = link_dir / "app.dist.json"
    job_file.write_bytes(make(link_dir))
    assert_one_line_error(dtlto(str(job_file), cache=True), PREFIX, says)


ARGUMENT_REGRESSIONS: dict[str, tuple[list[str], str, str]] = {
    # name: (options before the job file, $GOMA_EXT_DTLTO, what the one line says); "bad/…" names a bad_paths file
    "config-name-too-long": (["--config", LONG_NAME], "", "File name too long"),
    "config-nested-too-deep": (["--config", "bad/deep.json"], "", "nested too deeply"),
    "config-not-UTF-8": (["--config", "bad/binary"], "", "not UTF-8 text"),
    "config-wrong-types": (["--config", "bad/types.yaml"], "", "dtlto.jobs: expected an integer, got 'many'"),
    "cache-path-too-long": (["--cache", "a/" * 3000], "", "(5999 characters)"),
    "cache-a-file": (["--cache", "bad/binary"], "", "--cache bad/binary: not a directory"),
    "slots-dir-a-file": (["--slots-dir", "bad/binary"], "", "--slots-dir bad/binary: not a directory"),
    "unbalanced-quote-in-env": ([], "--jobs=2 'unbalanced", "$GOMA_EXT_DTLTO: cannot split into options"),
    "bad-int-option": (["--jobs", "x"], "", "goma-ext dtlto: error: argument --jobs: invalid int value: 'x'"),
    "jobs-too-many": (["--jobs", "99999999999999999999"], "", "must be from 1 to 4096"),
    "undecodable-job-file-name": (["\udcff"], "", "\\udcff: no such job file"),
    "job-file-name-too-long": ([LONG_NAME], "", "cannot read: File name too long"),
}


@pytest.mark.parametrize("name", sorted(ARGUMENT_REGRESSIONS))
def test_argument_regressions(link_dir: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    options, env, says = ARGUMENT_REGRESSIONS[name]
    bad_paths(link_dir)
    job_file = link_dir / "app.dist.json"
    job_file.write_text(json.dumps(job_doc(link_dir)))
    monkeypatch.setenv("GOMA_EXT_DTLTO", env)
    argv = options if "job-file-name" in name else [*options, str(job_file)]
    assert_one_line_error(call(cli.main, ["dtlto", *argv]), PREFIX, says)


def test_mutate_bytes_is_deterministic() -> None:
    """The fuzzers' inputs depend on their seed alone (a failure found in CI reproduces anywhere)."""
    data = json.dumps(GOOD).encode()
    assert mutate_bytes(random.Random(9), data) == mutate_bytes(random.Random(9), data)
