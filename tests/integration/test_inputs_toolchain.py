"""`goma-ext inputs` and `goma-ext index` against real backends: the input set is what clang actually opens."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from goma_ext.bitcode.index import read_index
from goma_ext.inputs.backend import backend_inputs
from tests.conftest import LLVM_VERSIONS
from tests.integration.index_workspace import Layout, Workspace, build

SMALL = Layout(plain=40, static=8, thin=6, startlib=10, main_stride=8)
_OPENAT = re.compile(r'^\d+\s+open(?:at)?\((?:AT_FDCWD, )?"([^"]+)", ([A-Z_|]+)[^)]*\)\s+=\s+(\d+)')


@pytest.fixture(scope="module", params=LLVM_VERSIONS, ids=[f"llvm{v}" for v in LLVM_VERSIONS])
def workspace(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    version = request.param
    ws = build(tmp_path_factory.mktemp(f"inputs{version}"), Path(f"/usr/lib/llvm-{version}/bin"), SMALL)
    (ws.root / "flags.rsp").write_text("-O2 -Wno-unused-command-line-argument\n")
    (ws.root / "empty.proftext").write_text("")
    subprocess.run([ws.tool("llvm-profdata"), "merge", "-o", "prof.profdata", "empty.proftext"], cwd=ws.root, check=True)
    return ws


def goma_ext(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "goma_ext.cli", *args], cwd=cwd, capture_output=True, text=True)


def opened_inputs(ws: Workspace, command: list[str]) -> set[str]:
    """Files inside the workspace that `command` opened read-only, observed with strace."""
    log = ws.root / "strace.log"
    proc = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(log), *command], cwd=ws.root,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    seen = set()
    for line in log.read_text().splitlines():
        m = _OPENAT.match(line)
        if not m or any(f in m.group(2) for f in ("O_WRONLY", "O_RDWR", "O_CREAT", "O_DIRECTORY")):
            continue
        path = os.path.normpath(os.path.join(ws.root, m.group(1)))
        if path.startswith(str(ws.root) + os.sep):
            seen.add(os.path.relpath(path, ws.root))
    return seen


def backend(ws: Workspace, obj: str, index: str | None = None, *extra: str) -> list[str]:
    return [ws.tool("clang"), "@flags.rsp", *extra, "-c", "-x", "ir", obj,
            f"-fthinlto-index={index or obj + '.thinlto.bc'}", "-o", obj + ".native.o"]


def _importing_object(ws: Workspace) -> str:
    """An object whose index imports at least three modules, none from an archive (clang can open those)."""
    for path in ws.index_files():
        rel = os.path.relpath(path, ws.root)[: -len(".thinlto.bc")]
        imports = read_index(path).imported_paths(rel)
        if len(imports) >= 3 and not any("(" in p for p in imports) and "(" not in rel:
            return rel
    raise AssertionError("no suitable object in the workspace")


def test_inputs_equal_what_the_backend_opens(workspace: Workspace) -> None:
    obj = _importing_object(workspace)
    command = backend(workspace, obj, None, "-fprofile-instr-use=prof.profdata")
    out = goma_ext("inputs", "--", *command, cwd=workspace.root)
    assert out.returncode == 0, out.stderr
    listed = out.stdout.splitlines()
    assert listed[:2] == [obj, obj + ".thinlto.bc"] and "flags.rsp" in listed and "prof.profdata" in listed
    assert set(listed) == opened_inputs(workspace, command)
    assert len(listed) == len(set(listed)) >= 6


def test_skip_and_zero_byte_indexes_import_nothing(workspace: Workspace) -> None:
    obj = "obj/lazy/unused_startlib.o"
    assert read_index(workspace.root / f"{obj}.thinlto.bc").skip
    command = backend(workspace, obj)
    out = goma_ext("inputs", "--", *command, cwd=workspace.root)
    assert out.stdout.splitlines() == [obj, obj + ".thinlto.bc", "flags.rsp"]
    assert set(out.stdout.splitlines()) == opened_inputs(workspace, command)
    (workspace.root / "empty.thinlto.bc").write_bytes(b"")
    command = backend(workspace, "obj/t3.o", "empty.thinlto.bc")
    out = goma_ext("inputs", "--", *command, cwd=workspace.root)
    assert out.stdout.splitlines() == ["obj/t3.o", "empty.thinlto.bc", "flags.rsp"]
    assert set(out.stdout.splitlines()) == opened_inputs(workspace, command)


def test_archive_members_map_to_their_archive(workspace: Workspace) -> None:
    out = goma_ext("inputs", "--json", "--", *backend(workspace, "obj/main.o"), cwd=workspace.root)
    result = json.loads(out.stdout)
    assert "lib/libstatic.a" in result["imports"] and "lib/libthin.a" in result["imports"]
    assert not any("(" in p for p in result["imports"]) and result["output"] == "obj/main.o.native.o"
    # thin archive members also map to their own files, which must exist; regular members do not
    modules = read_index(workspace.root / "obj/main.o.thinlto.bc").imported_paths("obj/main.o")
    thin = sorted(p.split("(")[1].split(" at ")[0] for p in modules if p.startswith("lib/libthin.a("))
    assert thin and sorted(Path(p).name for p in result["imports"] if p.startswith("obj/thin/")) == thin
    assert all((workspace.root / p).is_file() for p in result["imports"])
    assert not any(p.startswith("obj/static/") for p in result["imports"])


def test_imports_file_disagreement_is_an_error(workspace: Workspace, tmp_path: Path) -> None:
    obj = _importing_object(workspace)
    imports = workspace.root / f"{obj}.imports"
    saved = imports.read_text()
    try:
        imports.write_text(saved + "obj/not-imported.o\n")
        out = goma_ext("inputs", "--", *backend(workspace, obj), cwd=workspace.root)
    finally:
        imports.write_text(saved)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and "goma-ext: error:" in out.stderr
    assert f"{obj}.imports" in out.stderr and f"{obj}.thinlto.bc" in out.stderr and "obj/not-imported.o" in out.stderr


def test_index_command(workspace: Workspace, tmp_path: Path) -> None:
    out = goma_ext("index", "obj/main.o.thinlto.bc", "--json", cwd=workspace.root)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["skip"] is False and doc["version"] in (10, 12) and len(doc["modules"]) > 10
    assert all(len(m["hash"]) == 40 for m in doc["modules"])
    assert sum(doc["summary_counts"].values()) == sum(m["summaries"] for m in doc["modules"]) > 0
    text = goma_ext("index", "obj/main.o.thinlto.bc", cwd=workspace.root).stdout
    assert "skip no" in text and "obj/main.o" in text
    bad = tmp_path / "bad.thinlto.bc"
    shutil.copy(workspace.root / "obj/main.o.thinlto.bc", bad)
    bad.write_bytes(bad.read_bytes()[:64])
    out = goma_ext("index", str(bad), cwd=workspace.root)
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "byte " in out.stderr and "MODULE_BLOCK" in out.stderr


def test_every_object_backend_agrees_with_its_imports_file(workspace: Workspace) -> None:
    """In-process, for every object outside archives: self found by hash, .imports agrees, paths exist."""
    checked = 0
    for path in workspace.index_files():
        obj = os.path.relpath(path, workspace.root)[: -len(".thinlto.bc")]
        if "(" in obj or not obj.startswith("obj/"):  # archive members; indexes other tests wrote
            continue
        result = backend_inputs(backend(workspace, obj), workspace.root)
        listed = (workspace.root / f"{obj}.imports").read_text().splitlines()
        assert len(result.imports) >= len({p.split("(")[0] for p in listed}), obj
        assert result.skip == read_index(path).skip and result.paths[:2] == (obj, f"{obj}.thinlto.bc")
        assert all((workspace.root / p).exists() for p in result.paths if p != "prof.profdata"), obj
        checked += 1
    assert checked >= SMALL.plain + SMALL.startlib
