"""Backends rendered through the REAPI wrapper when remote execution is configured (gen --remote / remote:)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gn_thinlto.errors import GnThinltoError
from gn_thinlto.gn.ninja_text import parse
from gn_thinlto.hook import remote_backends
from gn_thinlto.plan.config import Config, parse_config
from gn_thinlto.plan.model import RemoteBackends
from gn_thinlto.render.ninja import NAIVE_RSP_NAME, render_files

from .test_plan import basic_plan

LAUNCHER = ("/py", "-m", "goma_ext.remote.wrapper", "--remote", "grpc://h:1", "--exec-root", ".")


def remote_files() -> tuple[dict[str, str], object]:
    plan = replace(basic_plan(Config()), remote=RemoteBackends(LAUNCHER, jobs=7))
    return render_files(plan), plan


def test_backend_rule_runs_through_the_wrapper_in_a_remote_pool() -> None:
    files, plan = remote_files()
    rules = files[plan.rules_file]
    assert "pool gn_thinlto_remote\n  depth = 7\n" in rules
    backend_rule = rules.split("rule gn_thinlto_backend\n", 1)[1].split("\n\n", 1)[0]
    assert "--launcher -- /py -m goma_ext.remote.wrapper --remote grpc://h:1 --exec-root . --naive-inputs $naive_rsp -- $argv" in backend_rule
    assert "pool = gn_thinlto_remote" in backend_rule
    parse(rules)


def test_every_target_names_its_naive_input_list() -> None:
    files, plan = remote_files()
    for t in plan.targets:
        rsp = f"{t.directory}/{NAIVE_RSP_NAME}"
        assert f"\nnaive_rsp = {rsp}\n" in files[t.ninja_file]
        assert files[rsp].split() == sorted({b.bitcode for b in t.backends})


def test_local_rendering_has_no_remote_traces() -> None:
    files = render_files(basic_plan(Config()))
    assert not any(name.endswith(NAIVE_RSP_NAME) for name in files)
    assert not any("naive_rsp" in text or "gn_thinlto_remote" in text for text in files.values())


def test_remote_section_endpoint_environment_and_flag_merge() -> None:
    config = parse_config({"remote": {"endpoint": "grpc://127.0.0.1:9", "jobs": 5}}, "g.yaml")
    got = remote_backends(config, None, {}, Path())
    assert got is not None and got.jobs == 5
    assert got.launcher[got.launcher.index("--remote") + 1] == "grpc://127.0.0.1:9"
    flag = remote_backends(config, "grpcs://other:443", {}, Path())
    assert flag is not None and "grpcs://other:443" in flag.launcher
    assert remote_backends(config, None, {"GOMA_EXT_REMOTE": "off"}, Path()) is None
    assert remote_backends(Config(), None, {}, Path()) is None


def test_a_token_file_others_may_read_is_refused_at_gen_in_one_line(tmp_path: Path) -> None:
    """Checked where the settings are given: else every backend would warn and run locally. Relative paths are the
    build directory's (where the backends run); a file not made yet is left to the backends."""
    (tmp_path / "token").write_text("s3cret\n")
    (tmp_path / "token").chmod(0o644)
    config = parse_config({"remote": {"endpoint": "grpcs://h:1", "token_file": "token"}}, "g.yaml")
    with pytest.raises(GnThinltoError, match=r"^g\.yaml: remote: remote token_file .*token: mode 644 lets other "):
        remote_backends(config, None, {}, tmp_path)
    (tmp_path / "token").chmod(0o600)
    assert remote_backends(config, None, {}, tmp_path) is not None
    assert remote_backends(config, None, {}, tmp_path / "elsewhere") is not None  # not there yet


def test_bad_remote_settings_are_one_line_errors_naming_the_file() -> None:
    with pytest.raises(GnThinltoError, match=r"^g\.yaml: remote: .*endpoint"):
        remote_backends(parse_config({"remote": {"endpoint": "http://x"}}, "g.yaml"), None, {}, Path())
    with pytest.raises(GnThinltoError, match=r"^g\.yaml: remote: expected a mapping"):
        parse_config({"remote": "grpc://x:1"}, "g.yaml")
