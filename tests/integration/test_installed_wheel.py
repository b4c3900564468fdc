"""[trust] What a user installs works: the wheel and the sdist built from the committed tree, the wheel installed
into a new venv outside the checkout, every console command and subcommand's --help run there, every module
imported, and the example built with that venv alone (its build steps run from site-packages).

`./dev` installs in editable mode, which finds any package in the tree; a package missing from the wheel (as
goma_ext.dtlto and goma_ext.proxy once were) shows only here.
"""

from __future__ import annotations

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
    """sdist and wheel built as `python -m build` builds them (the wheel from the sdist), from a copy of the
    tracked files: what a user's `pip install .` or an index would get, and nothing written into the tree."""
    tree = tmp_path_factory.mktemp("tree") / "gn-thinlto"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split("\n")
    for name in filter(None, files):
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(tree)], capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new venv (outside the checkout) with the wheel and its dependencies, nothing else."""
    env = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True, timeout=300)
    wheel = next(dist.glob("*.whl"))
    proc = subprocess.run([str(env / "bin/pip"), "install", "--quiet", str(wheel)], capture_output=True, text=True,
                          timeout=900)
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
