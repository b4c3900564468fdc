"""[trust] What a user installs works: the wheel and the sdist built from the committed tree, the wheel installed
into a new venv outside the checkout, every console command and subcommand's --help run there, every module
imported, and the example built with that venv alone (its build steps run from site-packages).

`./dev` installs in editable mode, which finds any package in the tree; a package missing from the wheel (as
goma_ext.dtlto and goma_ext.proxy once were) shows only here.

The wheel's dependencies come offline, packed from the distributions installed beside the tests (`wheelhouse`):
pip still resolves the wheel's own Requires-Dist, so an undeclared dependency fails here. Which versions an index
gives today is what the fresh-machine check's new venv installs (`./dev` from setup.cfg), not this test.
"""

from __future__ import annotations

import email
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.builds import REPO, Build, copy_without_backends

pytestmark = pytest.mark.slow

ROOTS = ("gn_thinlto", "goma_ext", "thinlto_base")
COMMANDS = ("gn-thinlto", "goma-ext")
# Prints every subcommand path of both command lines, one a line ("goma-ext cluster start"), from the parsers
# the installed package builds.
LIST_COMMANDS = """
import argparse
from gn_thinlto.cli.main import build_parser as gn
from goma_ext.cli import build_parser as gx

def walk(parser, path):
    print(" ".join(path))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                walk(sub, [*path, name])

walk(gn(), ["gn-thinlto"])
walk(gx(), ["goma-ext"])
"""
# `python -m build SOURCE --outdir OUT` (argv[1:3]) with build's API, as its command does it: the project's sdist,
# then the wheel from the sdist unpacked (in argv[3]), each with the build system's requirements and those its
# backend asks for installed in an isolated environment; one environment for both, not one each (the same
# requirements, installed again, took a third of the build).
BUILD = """
import sys, tarfile
from pathlib import Path
from build import ProjectBuilder
from build.env import DefaultIsolatedEnv
source, out, unpacked = map(Path, sys.argv[1:4])
with DefaultIsolatedEnv() as env:
    builder = ProjectBuilder.from_isolated_env(env, source)
    env.install(builder.build_system_requires)
    env.install(builder.get_requires_for_build("sdist"))
    sdist = Path(builder.build("sdist", out))
    with tarfile.open(sdist) as tar:  # our own sdist; the "data" filter where Python has it (3.11.4 and later)
        tar.extractall(unpacked, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    builder = ProjectBuilder.from_isolated_env(env, unpacked / sdist.name.removesuffix(".tar.gz"))
    env.install(builder.get_requires_for_build("wheel"))  # the build system's own are installed
    builder.build("wheel", out)
"""
IMPORT_ALL = """
import importlib, pkgutil, sys
names = []
for root in sys.argv[1:]:
    package = importlib.import_module(root)
    names.append(root)
    for info in pkgutil.walk_packages(package.__path__, root + "."):
        names.append(info.name)
for name in sorted(names):
    if not name.endswith(".__main__"):  # importing it would run the command
        importlib.import_module(name)
    print(name)
"""


def source_modules() -> list[str]:
    """Every module of the three packages in the tracked tree (templates/ ships as gn_thinlto.templates)."""
    tracked = subprocess.run(["git", "ls-files", *ROOTS, "templates"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    names = set()
    for path in tracked:
        if path.endswith(".py"):
            parts = Path(path).with_suffix("").parts
            parts = ("gn_thinlto", *parts) if parts[0] == "templates" else parts
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel built as `python -m build` builds them (the wheel from the sdist, BUILD), from a copy of the
    tracked files: what a user's `pip install .` or an index would get, and nothing written into the tree."""
    tree = tmp_path_factory.mktemp("tree") / "gn-thinlto"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-c", BUILD, str(tree), str(out), str(tmp_path_factory.mktemp("sdist"))],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def wheelhouse(wheel: Path, dest: Path) -> Path:
    """DEST with a wheel of each distribution WHEEL needs (its Requires-Dist, theirs, and so on), packed from the
    ones installed beside the tests: `./dev` installs them from setup.cfg's requirements (again when it changes), as
    an index gave them (the newest, in the fresh-machine check's new venv), and pip resolves WHEEL's requirements
    against them offline, instead of querying the indexes and downloading them again for each run. The packing
    leaves out what pip writes at install: bytecode, the record of installed files, the console scripts (made again
    from entry_points.txt)."""
    with zipfile.ZipFile(wheel) as z:
        metadata = email.message_from_bytes(z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))))
    todo = [(Requirement(r), "") for r in metadata.get_all("Requires-Dist") or ()]
    needed: dict[str, importlib.metadata.Distribution] = {}
    seen: set[tuple[str, str]] = set()  # (distribution, extra) whose requirements were followed
    while todo:
        req, extra = todo.pop()
        if req.marker and not req.marker.evaluate({"extra": extra}):
            continue
        dist = importlib.metadata.distribution(req.name)
        assert req.specifier.contains(dist.version, prereleases=True), f"{req}: {dist.version} installed"
        needed[dist.metadata["Name"]] = dist
        for wanted in ("", *req.extras):
            if (dist.metadata["Name"], wanted) not in seen:
                seen.add((dist.metadata["Name"], wanted))
                todo += [(Requirement(r), wanted) for r in dist.requires or ()]
    for name, dist in needed.items():
        files = [f for f in dist.files or () if f.parts[0] != ".." and f.suffix != ".pyc"]
        info = next((f.parts[0] for f in files if f.parts[0].endswith(".dist-info")), None)
        assert info, f"{name}: installed without a RECORD of its files in a .dist-info"
        files = [f for f in files
                 if not (f.parts[0] == info and f.name in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json"))]
        tag = re.search(r"^Tag: (\S+)$", dist.read_text("WHEEL") or "", re.M)
        assert tag, f"{name}: no wheel tag"
        with zipfile.ZipFile(dest / f"{re.sub(r'[-_.]+', '_', name).lower()}-{dist.version}-{tag[1]}.whl", "w") as z:
            for f in files:  # stored, not compressed: pip unpacks them at once
                z.write(str(dist.locate_file(f)), str(f))
            z.writestr(f"{info}/RECORD", "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"]))
    return dest


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new venv (outside the checkout) with the wheel and its dependencies, nothing else: not even pip and
    setuptools (ensurepip's install of them took 7.4 of the venv's 7.6 CPU s); the tests' pip installs into it.
    It leaves the bytecode to the venv's imports: compiling every dependency's modules at install cost more."""
    env = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=300)
    wheel = next(dist.glob("*.whl"))
    house = wheelhouse(wheel, tmp_path_factory.mktemp("wheelhouse"))
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(env / "bin/python"), "install", "--quiet",
                           "--no-compile", "--no-index", "--find-links", str(house), str(wheel)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    yield env
    shutil.rmtree(env, ignore_errors=True)


def run_in(env: Path, *argv: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    """ARGV with the venv's bin first on PATH and no trace of the checkout (no PYTHONPATH, another directory)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    clean["PATH"] = f"{env / 'bin'}:{clean.get('PATH', '')}"
    return subprocess.run(list(argv), cwd=cwd, env=clean, capture_output=True, text=True, timeout=timeout)


def test_sdist_and_wheel_carry_every_module_and_template(dist: Path) -> None:
    wheel = zipfile.ZipFile(next(dist.glob("*.whl"))).namelist()
    in_wheel = {n.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for n in wheel if n.endswith(".py")}
    assert set(source_modules()) <= in_wheel, sorted(set(source_modules()) - in_wheel)
    templates = sorted(p.name for p in (REPO / "templates").glob("*.j2"))
    assert templates and all(f"gn_thinlto/templates/{t}" in wheel for t in templates)
    sdist = tarfile.open(next(dist.glob("*.tar.gz"))).getnames()
    assert any(n.endswith("/templates/rules.ninja.j2") for n in sdist)
    assert any(n.endswith("/goma_ext/dtlto/distributor.py") for n in sdist)


def test_installed_package_imports_every_module(venv: Path, tmp_path: Path) -> None:
    proc = run_in(venv, str(venv / "bin/python"), "-c", IMPORT_ALL, *ROOTS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == source_modules()
    where = run_in(venv, str(venv / "bin/python"), "-c", "import goma_ext; print(goma_ext.__file__)", cwd=tmp_path)
    assert str(venv) in where.stdout and str(REPO) not in where.stdout


def test_every_command_and_subcommand_help_runs(venv: Path, tmp_path: Path) -> None:
    listing = run_in(venv, str(venv / "bin/python"), "-c", LIST_COMMANDS, cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    paths = [line.split() for line in listing.stdout.splitlines()]
    assert {p[0] for p in paths} == set(COMMANDS) and len(paths) > 20
    for command in COMMANDS:
        version = run_in(venv, command, "--version", cwd=tmp_path)
        assert version.returncode == 0 and version.stdout.startswith(command), version.stderr
    failed = []
    for path in paths:
        proc = run_in(venv, *path, "--help", cwd=tmp_path)
        if proc.returncode != 0 or "usage:" not in proc.stdout or proc.stderr:
            failed.append(f"{' '.join(path)} --help: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    assert failed == []


def test_example_builds_with_the_installed_package(venv: Path, tmp_path: Path, example_tree: Build) -> None:
    """The README's main command with the installed `gn-thinlto`: GN's hook, the thin links and the backend
    steps (python -S scripts in site-packages) all come from the venv; every self-check passes. It runs on a copy
    of the session's build of the example with its backends forgotten: the compiles (clang alone) stay, every
    step of ours runs again."""
    tree = copy_without_backends(example_tree, tmp_path / "copy")
    out = tree.out
    proc = run_in(venv, "gn-thinlto", "example", "--root", str(tree.root), "--out", str(out), cwd=tmp_path,
                  timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "self-checks 11/11 passed" in proc.stdout.strip().splitlines()[-1]
    # the copy's backend cache was forgotten: each distinct backend compiles (an identical one in another binary hits)
    compiled = re.search(r"ThinLTO backends: \d+ jobs run, \d+ cache hits, (\d+) compiled", proc.stdout)
    assert compiled and int(compiled[1]) > 100, proc.stdout
    rules = (out / "gn-thinlto/rules.ninja").read_text()
    assert str(venv) in rules and f"{REPO}/gn_thinlto" not in rules
