"""Fuzzing what GN and the planner hand gn-thinlto: the hook's project.json, its config and GN's ninja files,
and the thin-link step's manifest. Every input ends in exit 0, or exit 2 with one `gn-thinlto: error:` line.

Each fuzzer mutates a valid input (GN's snapshot of tests/workspaces/basic in tests/golden/basic/gn, a config
using every key, the manifest the hook writes for //app:app) with a fixed random.Random seed: value swaps
(wrong types, 5,000-character names, lone surrogates, NUL bytes, newlines), deleted and added keys, nesting
100,000 deep, and byte flips, non-UTF-8 sequences and truncation of the text (fuzz_support). Counts, and the
distinct crashes (by exception and innermost project frame) each found before the fixes of [trust] item 5;
after: none.

- test_fuzz_hook_project_json: seed 1, 400 inputs; 4 crashes: project.json not UTF-8 (UnicodeDecodeError)
  or nested 100,000 deep (RecursionError), a number as a toolchain (AttributeError in gn/project.py), a lone
  surrogate in an output (UnicodeEncodeError writing refused.txt). A longer run (seed 7, 3,000 inputs) also
  found a 6,000-byte root_path (OSError ENAMETOOLONG) and a list as root_path (TypeError).
- test_fuzz_hook_config: seed 2, 300 configs; 6: nesting (RecursionError), a number as a key (TypeError),
  not UTF-8 (UnicodeDecodeError), a lone surrogate (UnicodeEncodeError), a newline in remote.instance and a
  NUL in cache_trusted_writers (ValueError). An earlier run also found a number as a `remote:` key
  (AttributeError in goma_ext.remote.config); a YAML alias making a list hold itself hung a first fix.
- test_fuzz_hook_gn_ninja: seed 3, 200 inputs; 4: a subninja'd file missing (FileNotFoundError), and
  build.ninja, toolchain.ninja or a target's ninja file not UTF-8 (UnicodeDecodeError).
- test_fuzz_thinlink_manifest: seed 4, 300 manifests; 4: a list as final_output (AttributeError), nesting
  (RecursionError in json), a 6,000-byte dyndep path (RecursionError in os.makedirs), and a newline in a
  bitcode name said on two lines.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gn_thinlto import hook
from gn_thinlto.steps import thinlink
from tests import budget

from .fuzz_support import (
    DEEP,
    DEEP_MARK,
    Findings,
    Outcome,
    assert_one_line_error,
    call,
    dump,
    mutate_bytes,
    mutations,
)
from .test_plan import BASIC_GN

PREFIX = "gn-thinlto: error: "
CONFIG = {
    "targets": {"include": ["//*"], "exclude": ["//tool:*"]},
    "target_dir": "gn-thinlto/{output}",
    "testonly": "thin_link",
    "backend_flags": {"add": ["-mllvm", "-x"], "remove": ["-fdata-sections"]},
    "thin_link_pool_depth": 2,
    "minimized_bitcode": False,
    "cache_dir": "gn-thinlto/cache",
    "cache_policy": "cache_size=10%:cache_size_bytes=40g",
    "backend_cache": True,
    "cache_trusted_writers": ["root", 0],
    "remote": {"endpoint": "grpc://127.0.0.1:8980", "instance": "main", "jobs": 8},
    "dyndep": True,
    "link_wrappers": [{"match": "*/wrap.sh", "inner_after": "--link"}],
}
YAML_DEEP = 600  # past what PyYAML can nest (its parser is quadratic in the depth: 100,000 would take minutes)
# YAML the JSON text of a mutated config cannot say: non-string keys, tags, dates, aliases, complex keys.
YAML_SNIPPETS = (
    "1: x\n", "? [a]\n: b\n", "targets: {include: [1, 2]}\n", "x: !!binary aGVsbG8=\n", "d: 2024-01-01\n",
    "a: &r [*r]\n", "remote: {1: 2}\n", "remote: {endpoint: [grpc]}\n", "backend_flags: {add: [null]}\n",
    "link_wrappers: [{match: 1, inner_after: x}]\n", "!!python/object:os.system x\n", "remote: !!set {a}\n",
)


class GnOut:
    """One build directory holding GN's snapshot, put back after each run (the hook edits GN's files in place
    and adds its own): cheaper than a copy per input."""

    def __init__(self, base: Path) -> None:
        self.out = base / "out"
        self.files = {p.relative_to(BASIC_GN): p.read_bytes() for p in BASIC_GN.rglob("*") if p.is_file()}
        self.files[Path("build.ninja.d")] = b"build.ninja.stamp: ../BUILD.gn\n"
        self.written: dict[Path, tuple[int, int]] = {}

    def fresh(self) -> Path:
        """The build directory as GN left it: the hook's directory gone, GN's files as they were (written again
        only when changed: file creation is most of a run's time)."""
        shutil.rmtree(self.out / hook.STATE_DIR, ignore_errors=True)
        for rel, data in self.files.items():
            path = self.out / rel
            try:
                st = path.stat()
                if self.written.get(rel) == (st.st_mtime_ns, st.st_ino):
                    continue
            except FileNotFoundError:
                path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            st = path.stat()
            self.written[rel] = (st.st_mtime_ns, st.st_ino)
        return self.out


@pytest.fixture
def gn_out(tmp_path: Path) -> GnOut:
    return GnOut(tmp_path)


def run_hook_on(out: Path, *extra: str) -> Any:
    return call(hook.main, [str(out / "project.json"), *extra])


def test_fuzz_hook_project_json(gn_out: GnOut) -> None:
    doc = json.loads((BASIC_GN / "project.json").read_text())
    findings = Findings()
    for data, what in mutations(1, budget.cases(400), doc):
        out = gn_out.fresh()
        (out / "project.json").write_bytes(data)
        findings.check(run_hook_on(out), PREFIX, what)
    findings.assert_none()


def _config_mutants(seed: int, count: int) -> Iterator[tuple[bytes, str]]:
    """Mutants of CONFIG: by value (as JSON, which is YAML), by bytes of its block YAML, and with YAML-only
    snippets inserted at a line start."""
    rng = random.Random(seed)
    block = yaml.safe_dump(CONFIG).encode()
    by_value = mutations(seed, count, CONFIG, byte_share=0.0, deep=YAML_DEEP)
    for _ in range(count):
        choice = rng.random()
        if choice < 0.5:
            yield next(by_value)
        elif choice < 0.8:
            yield mutate_bytes(rng, block)
        else:
            lines = block.splitlines(keepends=True)
            at = rng.randrange(len(lines) + 1)
            snippet = rng.choice(YAML_SNIPPETS).encode()
            yield b"".join([*lines[:at], snippet, *lines[at:]]), f"insert {snippet!r} at line {at}"


def test_fuzz_hook_config(gn_out: GnOut, tmp_path: Path) -> None:
    findings = Findings()
    config = tmp_path / "gn_thinlto.yaml"
    for data, what in _config_mutants(2, budget.cases(300)):
        out = gn_out.fresh()
        config.write_bytes(data)
        findings.check(run_hook_on(out, str(config)), PREFIX, what)
    findings.assert_none()


def test_fuzz_hook_gn_ninja(gn_out: GnOut) -> None:
    """Byte mutations of GN's toolchain.ninja and per-target ninja files, which the hook parses."""
    rng = random.Random(3)
    files = sorted(p.relative_to(BASIC_GN) for p in BASIC_GN.rglob("*.ninja"))
    findings = Findings()
    for _ in range(budget.cases(200)):
        rel = rng.choice(files)
        data, what = mutate_bytes(rng, (BASIC_GN / rel).read_bytes())
        out = gn_out.fresh()
        (out / rel).write_bytes(data)
        findings.check(run_hook_on(out), PREFIX, f"{rel}: {what}")
    findings.assert_none()


# Regression tests: one per distinct crash the fuzzers found (the input that showed it first, made smaller),
# and the message now given instead.
def _set(*path: str | int, value: Any) -> Callable[[Any], Any]:
    """A change to decoded JSON: the value at PATH becomes VALUE; returns the document."""
    def change(doc: Any) -> Any:
        inner = doc
        for key in path[:-1]:
            inner = inner[key]
        inner[path[-1]] = value
        return doc
    return change


def _without(key: str) -> Callable[[Any], Any]:
    return lambda doc: {k: v for k, v in doc.items() if k != key}


PROJECT_REGRESSIONS: dict[str, tuple[Callable[[Any], Any], bool, str]] = {
    # name: (change, on the bytes (else on the decoded JSON), what the one line says)
    "non-UTF-8": (lambda raw: raw[:7993] + b"\x97" + raw[7994:], True, "not UTF-8 text (byte 0x97 at offset 7993)"),
    "nested-100k-deep": (lambda raw: raw.replace(b'"metadata": {}', b'"metadata": ' + b"[" * DEEP + b"]" * DEEP, 1),
                         True, "nested too deeply"),
    "toolchain-not-a-string": (_set("targets", "//ss:ss", "toolchain", value=-1), False,
                               "targets['//ss:ss'].toolchain: expected a string, found a number"),
    "lone-surrogate-in-outputs": (_set("targets", "//tool:tool", "outputs", value=["\udcff"]), False,
                                  "targets.//tool:tool.outputs[0]: '\\udcff' holds a lone surrogate"),
    "root-path-too-long": (_set("build_settings", "root_path", value="a/" * 3000), False, "File name too long"),
    "root-path-a-list": (_set("build_settings", "root_path", value=[]), False,
                         "build_settings.root_path: expected a string, found a list"),
    "targets-a-list": (_set("targets", value=["//app:app"]), False, "targets: expected an object, found a list"),
    "outputs-a-string": (_set("targets", "//app:app", "outputs", value="./app"), False, "expected a list of strings"),
    "no-build-settings": (_without("build_settings"), False, "top level: no 'build_settings'"),
}


@pytest.mark.parametrize("name", sorted(PROJECT_REGRESSIONS))
def test_project_json_regressions(gn_out: GnOut, name: str) -> None:
    change, on_bytes, says = PROJECT_REGRESSIONS[name]
    out = gn_out.fresh()
    raw = (out / "project.json").read_bytes()
    if on_bytes:
        data = change(raw)
    else:
        data = json.dumps(change(json.loads(raw)), indent=1).encode()
    (out / "project.json").write_bytes(data)
    assert_one_line_error(run_hook_on(out), PREFIX, says)


CONFIG_REGRESSIONS: dict[str, tuple[str, str]] = {
    # name: (gn_thinlto.yaml, what the one line says)
    "nested-too-deep": ("minimized_bitcode: " + "[" * YAML_DEEP + "]" * YAML_DEEP + "\n", "nested too deeply"),
    "number-as-key": ("1: x\n", "unknown key(s) 1"),
    "number-as-remote-key": ("remote: {1: 2}\n", "remote: 1: not a setting name"),
    "non-UTF-8": ("dyndep: tru\udcffe\n", "not UTF-8 text (byte 0xff at offset 11)"),
    "lone-surrogate": ('backend_flags: {add: ["\\ud800"]}\n', "'\\ud800' holds a lone surrogate"),
    "newline-in-remote-instance": ('remote: {endpoint: "grpc://127.0.0.1:8980", instance: "a\\nb"}\n',
                                   "a value with a newline cannot be written to a ninja file"),
    "nul-in-trusted-writer": ('cache_trusted_writers: ["a\\0b"]\n', "expected user names or uids"),
    "list-holding-itself": ("targets: {include: &r [*r]}\n", "targets.include: expected a list of strings"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_REGRESSIONS))
def test_config_regressions(gn_out: GnOut, tmp_path: Path, name: str) -> None:
    text, says = CONFIG_REGRESSIONS[name]
    config = tmp_path / "gn_thinlto.yaml"
    config.write_bytes(text.encode(errors="surrogateescape"))
    assert_one_line_error(run_hook_on(gn_out.fresh(), str(config)), PREFIX, says)


GN_NINJA_REGRESSIONS: dict[str, tuple[str, Callable[[bytes], bytes], str]] = {
    # name: (GN's file, change, what the one line says)
    "subninja-missing": ("toolchain.ninja", lambda raw: raw.replace(b"app_unittests.ninja", b"app_unittests.7inja"),
                         "app_unittests.7inja: No such file or directory"),
    "build-ninja-non-UTF-8": ("build.ninja", lambda raw: raw[:616] + b"\xb2" + raw[617:], "not UTF-8 text"),
    "toolchain-non-UTF-8": ("toolchain.ninja", lambda raw: raw[:616] + b"\xfe\xff" + raw[616:], "not UTF-8 text"),
    "target-ninja-non-UTF-8": ("obj/app/app.ninja", lambda raw: raw[:620] + b"\x87" + raw[621:], "not UTF-8 text"),
}


@pytest.mark.parametrize("name", sorted(GN_NINJA_REGRESSIONS))
def test_gn_ninja_regressions(gn_out: GnOut, name: str) -> None:
    rel, change, says = GN_NINJA_REGRESSIONS[name]
    out = gn_out.fresh()
    (out / rel).write_bytes(change((out / rel).read_bytes()))
    assert_one_line_error(run_hook_on(out), PREFIX, says)


# -- the thin-link step ------------------------------------------------------------------------------------------

EMPTY_ELF = b"\x7fELF\x02\x01\x01" + bytes(57)  # an ELF64 header and no sections: an empty regular-LTO object


@pytest.fixture(scope="module")
def app_manifest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The manifest the hook writes for //app:app."""
    out = tmp_path_factory.mktemp("hook") / "out"
    shutil.copytree(BASIC_GN, out)
    assert hook.run_hook(out / "project.json", None, "/py").plan.links
    return json.loads((out / "gn-thinlto/app/thinlink.json").read_text())


def thinlink_build_dir(work: Path, m: dict[str, Any]) -> dict[str, Any]:
    """WORK as the build directory of manifest M's thin link, with a fake lld that copies what lld would write
    into M's stage directory; M with that linker."""
    prepared = work / "prepared"
    for bitcode in m["bitcode"]:
        for suffix in (".thinlto.bc", ".imports"):
            path = prepared / f"{bitcode}{suffix}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"")
    (prepared / "lto.split.o").write_bytes(EMPTY_ELF)
    (prepared / "used.txt").write_text("".join(f"{m['stage_dir']}/{b}\n" for b in m["bitcode"][:3]))
    (prepared / "why-extract.txt").write_text(
        "reference\textracted\tsymbol\nobj/app/app.main.o\tobj/lib/lib.asm.o\tf\n")
    for name in m["inputs"]:
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_bytes(b"BC")
    linker = work / "fake-lld"
    linker.write_text(f'#!/bin/sh\nmkdir -p "{m["stage_dir"]}" && cp -R "{prepared}/." "{m["stage_dir"]}/"\n')
    linker.chmod(linker.stat().st_mode | stat.S_IXUSR)
    return {**m, "argv": [str(linker), *m["argv"][1:]]}


@pytest.fixture
def thinlink_template(tmp_path: Path, app_manifest: dict[str, Any]) -> tuple[Path, dict[str, Any]]:
    """A build directory for //app:app's thin link (with the fake lld), and its manifest."""
    template = tmp_path / "template"
    template.mkdir()
    return template, thinlink_build_dir(template, app_manifest)


def run_thinlink(template: Path, work: Path, manifest: bytes) -> Outcome:
    """The step run in a copy WORK of TEMPLATE on MANIFEST (bytes)."""
    shutil.copytree(template, work, symlinks=True)
    (work / "m.json").write_bytes(manifest)
    cwd = os.getcwd()
    os.chdir(work)
    try:
        return call(thinlink.main, ["m.json"])
    finally:
        os.chdir(cwd)
        shutil.rmtree(work)


def test_fuzz_thinlink_manifest(tmp_path: Path, thinlink_template: tuple[Path, dict[str, Any]]) -> None:
    template, manifest = thinlink_template
    assert run_thinlink(template, tmp_path / "sane", dump(manifest)).code == 0, "the unmutated manifest must link"
    findings = Findings()
    for n, (data, what) in enumerate(mutations(4, 300, manifest)):
        findings.check(run_thinlink(template, tmp_path / f"b{n}", data), PREFIX, what)
    findings.assert_none()


THINLINK_REGRESSIONS: dict[str, tuple[Callable[[Any], Any], str]] = {
    # name: (change to the manifest, what the one line says)
    "final-output-a-list": (_set("final_output", value=["./app"]), "final_output: not a string"),
    "nested-100k-deep": (_set("inputs", 0, value=DEEP_MARK), "nested too deeply"),
    "dyndep-path-too-long": (_set("dyndep", value="a/" * 3000), "dyndep: a path of 6000 characters"),
    "newline-in-bitcode-name": (_set("bitcode", 2, value="sp ace$\n"), "lld wrote no gn-thinlto/app/stage/sp ace$\\n"),
    "no-argv": (_without("argv"), "no 'argv'"),
    "empty-argv": (_set("argv", value=[]), "argv: empty"),
    "not-an-object": (lambda m: [m], "not a thin-link manifest"),
}


@pytest.mark.parametrize("name", sorted(THINLINK_REGRESSIONS))
def test_thinlink_regressions(tmp_path: Path, thinlink_template: tuple[Path, dict[str, Any]], name: str) -> None:
    template, manifest = thinlink_template
    change, says = THINLINK_REGRESSIONS[name]
    mutant = change(json.loads(json.dumps(manifest)))
    assert_one_line_error(run_thinlink(template, tmp_path / "work", dump(mutant)), PREFIX, says)
