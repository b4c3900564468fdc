"""The proxy's settings check: merged once per distinct settings, still refused every time when wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from goma_ext.proxy import validate
from goma_ext.remote.config import load_config
from goma_ext.remote.proxy_client import endpoint_key

ENDPOINT = "grpc://127.0.0.1:1"


def _settings(**env: str) -> dict[str, object]:
    return {"section": {}, "env": {"GOMA_EXT_REMOTE": ENDPOINT, **env}, "flags": {}, "token_sha256": ""}


def _key(cwd: Path) -> str:
    cfg = load_config({}, {"GOMA_EXT_REMOTE": ENDPOINT}, {})
    assert cfg is not None
    return endpoint_key(cfg, cwd, "")


def test_the_same_settings_are_merged_once(tmp_path: Path) -> None:
    key = _key(tmp_path)
    first = validate._settings(_settings(), str(tmp_path), key)
    again = validate._settings({**_settings(), "flags": {}}, str(tmp_path), key)  # equal, not the same object
    assert again is first and first.endpoint == ENDPOINT
    other = validate._settings(_settings(GOMA_EXT_CACHE_SALT="s"), str(tmp_path), key)
    assert other is not first and other.cache_salt == "s"


def test_a_refusal_is_not_remembered(tmp_path: Path) -> None:
    """Each bad request is told why, also the second time; and settings that select another proxy (another build
    directory's key) are refused although the same settings were fine for their own."""
    key = _key(tmp_path)
    for _ in range(2):
        with pytest.raises(validate.Refusal, match=r"settings\.env"):
            validate._settings({**_settings(), "env": {"GOMA_EXT_REMOTE": 1}}, str(tmp_path), key)
    validate._settings(_settings(), str(tmp_path), key)
    other = tmp_path / "other"
    with pytest.raises(validate.Refusal, match="another proxy"):
        validate._settings({**_settings(), "section": {"instance": "x"}}, str(other), key)
