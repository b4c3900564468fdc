"""Remote settings: YAML section < environment < flags; bad values are one clear error."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.remote.config import RemoteConfig, load_config, section_from_yaml
from goma_ext.remote.wrapper import wrap_command
from tests.conftest import REPO


def test_yaml_section_env_and_overrides_merge_in_order(tmp_path: Path) -> None:
    y = tmp_path / "gn_thinlto.yaml"
    y.write_text("targets: {include: ['//*']}\nremote:\n  endpoint: grpc://a:1\n  instance: main\n  jobs: 8\n")
    section = section_from_yaml(y)
    cfg = load_config(section, {"GOMA_EXT_REMOTE_INSTANCE": "env"}, {"jobs": 3})
    assert cfg is not None
    assert (cfg.endpoint, cfg.instance, cfg.jobs, cfg.secure, cfg.target) == ("grpc://a:1", "env", 3, False, "a:1")


def test_off_or_missing_endpoint_means_local() -> None:
    assert load_config({}, {}) is None
    assert load_config({"endpoint": "grpc://a:1"}, {"GOMA_EXT_REMOTE": "off"}) is None
    assert load_config({}, {"GOMA_EXT_REMOTE": "off"}, {"endpoint": "grpc://flag:1"}) is None


@pytest.mark.parametrize(
    "section",
    [{"endpoint": "http://a:1"}, {"endpoint": "grpc://a:1", "ca_file": "x.pem"}, {"endpoint": "grpc://a:1", "bogus": 1},
     {"endpoint": "grpc://a:1", "jobs": "many"}, {"endpoint": "grpc://a:1", "jobs": 0}],
)
def test_bad_settings_are_config_errors(section: dict[str, object]) -> None:
    with pytest.raises(RemoteConfigError):
        load_config(section, {})


def test_token_from_env_becomes_bearer_metadata_and_never_reaches_the_command_line() -> None:
    cfg = load_config({"endpoint": "grpcs://h:1", "headers": {"X-Team": "t"}}, {"GOMA_EXT_REMOTE_TOKEN": "s3cret"})
    assert cfg is not None
    assert cfg.metadata() == (("x-team", "t"), ("authorization", "Bearer s3cret"))
    assert "s3cret" not in " ".join(wrap_command(["clang-19", "-c"], cfg)) and "s3cret" not in repr(cfg)


def test_a_token_file_others_may_read_or_change_is_refused_in_one_line(tmp_path: Path) -> None:
    """As PostgreSQL reads its key: a token file others may read may have leaked, and one another user owns may
    be changed by them; sending it on would hide that. Mode 0600 at most, 0640 when root owns it (as Debian's
    ssl-cert group reads keys)."""
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    token.chmod(0o600)
    cfg = RemoteConfig(endpoint="grpcs://h:1", token_file=token)
    assert cfg.metadata() == (("authorization", "Bearer s3cret"),)
    root = os.geteuid() == 0
    for mode in (0o644, 0o620, 0o604) if root else (0o644, 0o640, 0o620, 0o604):
        token.chmod(mode)
        with pytest.raises(RemoteConfigError, match=f"^remote token_file {token}: mode {mode:o} lets other users read "
                                                    f"or change a secret; chmod 600 {token}$"):
            cfg.metadata()
    token.write_bytes(b"\xff\n")
    token.chmod(0o600)
    with pytest.raises(RemoteConfigError, match=f"^remote token_file {token}: not text"):
        cfg.metadata()
    if root:  # a file of root's may be read by its group; one of another user's is theirs to change
        token.write_text("s3cret\n")
        token.chmod(0o640)
        assert cfg.metadata() == (("authorization", "Bearer s3cret"),)
        os.chown(token, 54321, 54321)
        token.chmod(0o600)
        with pytest.raises(RemoteConfigError, match=f"^remote token_file {token}: owned by uid 54321, who may "
                                                    "change a secret; use a copy of your own, mode 600$"):
            cfg.metadata()


def test_wrap_command_puts_settings_before_the_backend_argv() -> None:
    cfg = RemoteConfig(endpoint="grpcs://h:9", instance="i", ca_file=Path("ca.pem"), exec_root=Path("../.."))
    cmd = wrap_command(["clang++-19", "-c", "x.o"], cfg, naive_rsp="obj/link.rsp", launcher=["goma-ext", "run"])
    assert wrap_command(["c"], cfg)[:3] == [sys.executable, "-S", str(REPO / "goma_ext/remote/thin_client.py")]
    assert cmd == ["goma-ext", "run", "--remote", "grpcs://h:9", "--instance", "i", "--ca-file", "ca.pem",
                   "--exec-root", "../..", "--naive-inputs", "obj/link.rsp", "--", "clang++-19", "-c", "x.o"]


def test_unreachable_marker_holds_for_a_while(tmp_path: Path) -> None:
    from goma_ext.remote.wrapper import DOWN_HOLD_S, mark_down, marked_down

    assert marked_down(tmp_path, time.time()) is None
    mark_down(tmp_path, "GetCapabilities: UNAVAILABLE: connection refused")
    assert "UNAVAILABLE" in (marked_down(tmp_path, time.time()) or "")
    assert marked_down(tmp_path, time.time() + DOWN_HOLD_S + 1) is None


@pytest.mark.parametrize("secret", [{"token_file": "t"}, {"headers": {"X-Api-Key": "k"}}])
def test_credentials_in_clear_to_another_host_are_refused_naming_the_setting(secret: dict[str, object]) -> None:
    with pytest.raises(RemoteConfigError, match="allow_insecure_credentials") as e:
        load_config({"endpoint": "grpc://build.example.com:8980", **secret}, {})
    assert "\n" not in str(e.value) and "grpc://build.example.com:8980" in str(e.value)
    with pytest.raises(RemoteConfigError, match="token"):
        load_config({"endpoint": "grpc://10.0.0.7:1"}, {"GOMA_EXT_REMOTE_TOKEN": "s3cret"})


@pytest.mark.parametrize("target", ["127.0.0.1:1", "127.8.9.10:1", "localhost:1", "[::1]:1", "unix:/run/x.sock"])
def test_credentials_in_clear_to_loopback_are_allowed(target: str) -> None:
    cfg = load_config({"endpoint": f"grpc://{target}", "token_file": "t"}, {})
    assert cfg is not None and cfg.token_file == Path("t")


def test_credentials_in_clear_when_explicitly_allowed_or_over_tls() -> None:
    section = {"endpoint": "grpc://build.example.com:1", "token_file": "t"}
    assert load_config({**section, "allow_insecure_credentials": True}, {}) is not None
    assert load_config(section, {"GOMA_EXT_ALLOW_INSECURE_CREDENTIALS": "1"}) is not None
    assert load_config({**section, "endpoint": "grpcs://build.example.com:1"}, {}) is not None
    # not a loopback address: a name is not resolved, and 127.0.0.1.example.com is someone else's host
    for host in ("127.0.0.1.example.com", "0.0.0.0", "localhost.evil.example"):
        with pytest.raises(RemoteConfigError):
            load_config({**section, "endpoint": f"grpc://{host}:1"}, {})
    with pytest.raises(RemoteConfigError, match="allow_insecure_credentials"):
        load_config({**section, "allow_insecure_credentials": "maybe"}, {})


def test_the_allowance_travels_with_the_wrapped_command() -> None:
    cfg = load_config({"endpoint": "grpc://build.example.com:1", "token_file": "t",
                       "allow_insecure_credentials": True}, {})
    assert cfg is not None
    cmd = wrap_command(["clang-19", "-c"], cfg, launcher=["goma-ext", "run"])
    assert cmd[cmd.index("--allow-insecure-credentials") + 1] == "true"
    from goma_ext.remote.thin_client import parse

    parsed = parse(cmd[2:])
    assert parsed is not None and parsed[0]["allow_insecure_credentials"] == "true"


def test_action_shaping_settings_travel_with_the_wrapped_command_and_read_back_equal() -> None:
    section = {"endpoint": "grpcs://rbe.example.com:443", "toolchain": "host", "base_system": ["libc.so.6"],
               "platform": {"container-image": "docker://img@sha256:ab", "Pool": "big"}}
    cfg = load_config(section, {})
    assert cfg is not None
    cmd = wrap_command(["clang-19", "-c"], cfg, launcher=["goma-ext", "run"])
    assert cmd[cmd.index("--platform") + 1] == "Pool=big,container-image=docker://img@sha256:ab"
    from goma_ext.remote.thin_client import parse

    parsed = parse(cmd[2:])
    assert parsed is not None
    again = load_config({}, {}, {k: v for k, v in parsed[0].items() if k != "naive_inputs"})
    assert again is not None
    assert (again.toolchain, again.base_system, again.platform) == (cfg.toolchain, cfg.base_system, cfg.platform)
    default = load_config({"endpoint": "grpc://127.0.0.1:1"}, {})
    assert default is not None and "--platform" not in wrap_command(["clang-19"], default)
    assert "--toolchain" not in wrap_command(["clang-19"], default)
