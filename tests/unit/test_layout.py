"""[layout] The tree's layering holds: import-linter contracts, pure planning, stdlib-only build steps, lint."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

PACKAGES = ["gn_thinlto", "goma_ext", "thinlto_base"]
# Calls that write, move or delete files: none may appear in GN reading or planning (their imports are
# checked by the import-linter contract `planning-is-pure`; builtins and Path methods need this check).
PATH_WRITES = {"write_text", "write_bytes", "mkdir", "unlink", "rmdir", "touch", "chmod", "symlink_to", "hardlink_to"}
OS_WRITES = {"makedirs", "mkdir", "remove", "unlink", "rmdir", "rename", "replace", "symlink", "link", "chmod",
             "truncate", "system", "popen", "open", "write"}


@pytest.mark.parametrize("package", ["gn_thinlto/plan", "gn_thinlto/gn"])
def test_planning_writes_no_files(package: str) -> None:
    found = []
    for path in sorted((REPO / package).glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
                mode = node.args[1] if name == "open" and len(node.args) > 1 else None
                on_os = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "os"
                writes = name in OS_WRITES if on_os else name in PATH_WRITES
                if writes or (isinstance(mode, ast.Constant) and set(str(mode.value)) & set("wax+")):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}: {name}")
    assert found == []


def _loaded_under_dash_s(modules: str) -> list[str]:
    """The modules `python -S` has loaded after importing MODULES (comma-separated), as a step script would."""
    probe = (
        "import sys, json\n"
        f"sys.path[0] = {str(REPO)!r}\n"
        f"import {modules}\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(proc.stdout)
    return loaded


def test_build_steps_load_only_the_standard_library() -> None:
    """What `python -S step.py` really loads: every module outside the project is from the standard library."""
    loaded = _loaded_under_dash_s("gn_thinlto.steps.thinlink, gn_thinlto.steps.backend")
    ours = {"gn_thinlto", "thinlto_base", "__main__"}
    outside = [m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names | ours]
    project = sorted({m for m in loaded if m.startswith("gn_thinlto.") and not m.startswith("gn_thinlto.steps")})
    assert outside == [] and project == ["gn_thinlto.errors"]


def test_the_step_server_loads_only_the_standard_library_and_the_thin_client() -> None:
    """`python -S step_server.py` too: its one module from goma_ext is the thin client (with what it imports)."""
    loaded = _loaded_under_dash_s("gn_thinlto.steps.step_server")
    thin_client = set(_loaded_under_dash_s("goma_ext.remote.thin_client"))
    ours = {"gn_thinlto", "thinlto_base", "goma_ext", "__main__"}
    outside = [m for m in loaded if m.split(".")[0] not in sys.stdlib_module_names | ours]
    goma = [m for m in loaded if m.split(".")[0] == "goma_ext" and m not in thin_client]
    assert outside == [] and goma == [] and "goma_ext.remote.thin_client" in loaded


def test_dev_runs_the_static_checks_on_every_package() -> None:
    """ruff, mypy, import-linter and the strict docs build run beside pytest (`./dev test`, `./dev check`)."""
    proc = subprocess.run(["bash", "-c", 'source <(sed -n "/^packages=/,/^checks=/p" dev); printf "%s\\n" "${checks[@]}"'],
                          cwd=REPO, capture_output=True, text=True, check=True)
    checks = proc.stdout.splitlines()
    assert [c.split()[0] for c in checks] == ["ruff", "mypy", "lint-imports", "mkdocs"]
    assert all(c.endswith(" ".join(PACKAGES)) for c in checks[:2]) and "--strict" in checks[3]
