"""[fresh] gen names the .gn fix when GN would run the hook with a `python` that is not on PATH."""

from __future__ import annotations

from pathlib import Path

import pytest

from gn_thinlto.cli import gen
from gn_thinlto.errors import GnThinltoError


def _dot_gn(tmp_path: Path, text: str) -> Path:
    (tmp_path / ".gn").write_text(text)
    return tmp_path / ".gn"


def test_no_script_executable_and_no_python_is_one_line_naming_the_fix(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gen.shutil, "which", lambda name: None)
    dot_gn = _dot_gn(tmp_path, 'buildconfig = "//BUILDCONFIG.gn"\n')
    with pytest.raises(GnThinltoError) as e:
        gen._check_script_executable(dot_gn)
    assert str(dot_gn) in str(e.value) and 'script_executable = "python3"' in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("python", [None, "/usr/bin/python"])
def test_a_set_script_executable_or_a_python_on_path_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            python: str | None) -> None:
    monkeypatch.setattr(gen.shutil, "which", lambda name: python)
    text = 'buildconfig = "//BUILDCONFIG.gn"\n' + ("" if python else '  script_executable = "python3"\n')
    gen._check_script_executable(_dot_gn(tmp_path, text))
