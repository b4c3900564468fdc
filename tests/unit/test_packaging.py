"""The package's entry points and shipped templates work from outside the source tree."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gn_thinlto.cli import main as cli
from gn_thinlto.errors import GnThinltoError
from gn_thinlto.render.templating import render
from gn_thinlto.steps.ninja_syntax import escape, escape_path
from goma_ext import __version__


def test_versions_match_across_entry_points(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"gn-thinlto {__version__}"


@pytest.mark.parametrize("module,name", [("gn_thinlto.cli", "gn-thinlto"), ("goma_ext.cli", "goma-ext")])
def test_cli_version_from_unrelated_directory(tmp_path, module: str, name: str) -> None:
    out = subprocess.run([sys.executable, "-m", module, "--version"], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.strip() == f"{name} {__version__}"


def test_template_renders_from_unrelated_directory(tmp_path) -> None:
    code = "from gn_thinlto.render.templating import render; print(render('header.ninja.j2', version='9', source='x'))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "ninja_required_version = 1.10" in out.stdout


def test_header_template_escapes_its_source() -> None:
    assert "from a$ b$$c." not in render("header.ninja.j2", version="1", source="a b$c")
    assert "from a b$$c." in render("header.ninja.j2", version="1", source="a b$c")


@pytest.mark.parametrize(
    "raw,path,value",
    [("a b", "a$ b", "a b"), ("c:d", "c$:d", "c:d"), ("$x", "$$x", "$$x"), ("plain/o.o", "plain/o.o", "plain/o.o")],
)
def test_ninja_escaping_contexts(raw: str, path: str, value: str) -> None:
    assert escape_path(raw) == path
    assert escape(raw) == value


def test_newline_is_refused_in_ninja_output() -> None:
    with pytest.raises(GnThinltoError, match="newline"):
        escape_path("a\nb")
