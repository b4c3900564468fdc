"""docs/reference is what gn_thinlto.reference generates from the code, and describes everything the code reads."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from gn_thinlto import reference
from gn_thinlto.plan.config import SETTINGS as GN_SETTINGS
from gn_thinlto.plan.config import Config, parse_config
from goma_ext.dtlto import cli as dtlto_cli
from goma_ext.remote.config import SETTINGS as REMOTE_SETTINGS
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.names import ENV_VARS

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("gn_thinlto", "goma_ext", "thinlto_base", "templates")  # what users run (not tests/, bench/, dev)
ENV_NAME = re.compile(r"\b(?:GOMA_EXT|GN_THINLTO)_[A-Z0-9]+(?:_[A-Z0-9]+)*\b")  # not the bare `GOMA_EXT_` prefix


@pytest.mark.parametrize("name", sorted(reference.pages()))
def test_committed_page_is_what_the_code_generates(name: str) -> None:
    committed = REPO / "docs" / "reference" / name
    expected = reference.pages()[name]
    actual = committed.read_text(encoding="utf-8") if committed.is_file() else ""
    assert actual == expected, f"docs/reference/{name} is out of date with the code: run `{reference.COMMAND}`"


def test_check_mode_says_which_page_and_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main(["--dir", str(tmp_path)]) == 0
    assert reference.main(["--dir", str(tmp_path), "--check"]) == 0
    (tmp_path / "config.md").write_text("stale\n")
    assert reference.main(["--dir", str(tmp_path), "--check"]) == 1
    assert capsys.readouterr().err == f"config.md: out of date with the code; run `{reference.COMMAND}`\n"


def _names_read_by_the_code() -> dict[str, str]:
    """Each GOMA_EXT_*/GN_THINLTO_* name in the packages' sources -> one file that has it."""
    found: dict[str, str] = {}
    for top in SOURCES:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".c", ".h", ".sh", ".j2", ".jinja", ".ninja", ".gn"):
                for name in ENV_NAME.findall(path.read_text(encoding="utf-8", errors="replace")):
                    found.setdefault(name, str(path.relative_to(REPO)))
    return found


def test_every_variable_the_code_reads_is_described() -> None:
    in_code = _names_read_by_the_code()
    described = reference.environment()
    missing = {name: where for name, where in in_code.items() if name not in described}
    assert not missing, (f"variables without a description (add them to an ENVIRONMENT table next to where they "
                         f"are read, collected by gn_thinlto.reference): {missing}")
    assert not set(described) - set(in_code), "described variables the code no longer reads"


def test_every_remote_field_is_a_documented_setting() -> None:
    # a field without a line in remote.config._MEANINGS would be refused as an unknown `remote:` key
    assert {s.key for s in REMOTE_SETTINGS} == {f.name for f in fields(RemoteConfig)} - {"token"}
    assert {s.env for s in REMOTE_SETTINGS if s.env} == set(ENV_VARS)


def test_the_settings_defaults_are_the_configs() -> None:
    assert parse_config({}, "x.yaml") == Config(source="x.yaml")
    assert {s.top for s in GN_SETTINGS} == {
        "targets", "target_dir", "testonly", "backend_flags", "thin_link_pool_depth", "minimized_bitcode",
        "cache_dir", "backend_cache", "remote", "dyndep", "link_wrappers", "cache_policy", "cache_trusted_writers",
        "step_server", "step_servers", "lto_partitions",
    }


def test_the_dtlto_section_checks_each_documented_key() -> None:
    assert set(dtlto_cli._SECTION_TYPES) == set(dtlto_cli.SECTION_KEYS)
