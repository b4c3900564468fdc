"""Checks on a `run` request before the proxy acts on it (the proxy's counterpart of the worker's policy)."""

from __future__ import annotations

import functools
import json
import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from goma_ext.proxy.shared import ActionRequest
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteConfigError
from goma_ext.remote.config import ENV_VARS, RemoteConfig, download_from_flags, load_config
from goma_ext.remote.identity import CompilerIdentity
from goma_ext.remote.proxy_client import endpoint_key

MAX_ARGS = 100_000
MAX_TIMEOUT_S = 24 * 3600.0
RUN_KEYS = frozenset({"op", "version", "argv", "cwd", "compiler", "settings", "inputs", "outputs"})
MAX_OUTPUTS = 16
SETTINGS_MEMO = 256  # merged settings remembered: a build directory sends the same ones with every action
SETTINGS_KEYS = frozenset({"section", "env", "flags", "token_sha256"})
FLAG_KEYS = frozenset({"endpoint", "instance", "ca_file", "client_cert", "client_key", "token_file", "exec_root",
                       "allow_insecure_credentials", "toolchain", "base_system", "platform", "download",
                       "compression"})
_SHA256 = re.compile(r"[0-9a-f]{64}")


class Refusal(Exception):
    """The request is invalid; the message says which field and why (one line)."""


def _settings(value: object, cwd: str, proxy_key: str) -> RemoteConfig:
    """The request's settings merged as the in-process client merges them; they must select this proxy.

    Merging is a pure function of the request's fields, and every action of a build sends the same ones: the result
    is remembered by their canonical JSON (a refusal is not, so each bad request is told why)."""
    return _merged(json.dumps(value, sort_keys=True, separators=(",", ":")), cwd, proxy_key)


@functools.lru_cache(maxsize=SETTINGS_MEMO)
def _merged(text: str, cwd: str, proxy_key: str) -> RemoteConfig:
    value = json.loads(text)
    if not isinstance(value, dict) or set(value) != SETTINGS_KEYS:
        raise Refusal(f"`settings` must be an object with {', '.join(sorted(SETTINGS_KEYS))}")
    section, env, flags, token = (value[k] for k in ("section", "env", "flags", "token_sha256"))
    if not isinstance(section, dict):
        raise Refusal("`settings.section` must be an object")
    for name, d, keys in (("env", env, None), ("flags", flags, FLAG_KEYS)):
        if not isinstance(d, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in d.items()):
            raise Refusal(f"`settings.{name}` must map strings to strings")
        if keys is not None and (extra := sorted(set(d) - keys)):
            raise Refusal(f"`settings.{name}`: unknown setting(s) {', '.join(extra)}")
    if not isinstance(token, str) or (token and not _SHA256.fullmatch(token)):
        raise Refusal("`settings.token_sha256` must be empty or 64 lowercase hex digits")
    try:
        cfg = load_config(section, {k: v for k, v in env.items() if k in ENV_VARS}, flags)
    except RemoteConfigError as e:
        raise Refusal(f"settings: {e}") from e
    if cfg is None:
        raise Refusal("settings: remote execution is off")
    key = endpoint_key(cfg, Path(cwd), token)
    if key != proxy_key:
        raise Refusal(f"settings select another proxy ({cfg.endpoint}, key {key}; this one is {proxy_key})")
    return download_from_flags(cfg, flags)


def _compiler(value: object, digest_of: Callable[[Path, os.stat_result], Digest]) -> CompilerIdentity:
    """The client's claim about its compiler, checked against the binary's content (hashed, never run)."""
    if not isinstance(value, dict) or set(value) != {"path", "version", "sha256"}:
        raise Refusal("`compiler` must be an object with path, version and sha256")
    path, version, sha = (value[k] for k in ("path", "version", "sha256"))
    if not (isinstance(path, str) and os.path.isabs(path) and isinstance(version, str) and isinstance(sha, str)):
        raise Refusal("`compiler` path must be absolute; version and sha256 strings")
    if not version.strip() or "\n" in version or len(version) > 500 or not _SHA256.fullmatch(sha):
        raise Refusal("`compiler` version must be one non-empty line and sha256 64 lowercase hex digits")
    try:
        st = os.stat(path)
    except OSError as e:
        raise Refusal(f"compiler {path}: {e.strerror}") from e
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o111:
        raise Refusal(f"compiler {path} is not an executable file")
    actual = digest_of(Path(path), st).hash
    if actual != sha:
        raise Refusal(f"compiler {path} has sha256 {actual}, not the {sha} the client claims")
    return CompilerIdentity(Path(path), version.strip(), sha)


def run_request(msg: Mapping[str, Any], digest_of: Callable[[Path, os.stat_result], Digest],
                proxy_key: str) -> ActionRequest:
    """A validated ActionRequest, or Refusal naming the first bad field."""
    if unknown := sorted(set(msg) - RUN_KEYS):
        raise Refusal(f"unknown field(s) {', '.join(map(repr, unknown))}")
    argv = msg.get("argv")
    if not isinstance(argv, list) or not 0 < len(argv) <= MAX_ARGS:
        raise Refusal(f"`argv` must be a list of 1 to {MAX_ARGS} strings")
    if not all(isinstance(a, str) and "\0" not in a for a in argv) or not argv[0]:
        raise Refusal("`argv` entries must be strings without NUL bytes, the first non-empty")
    cwd = msg.get("cwd")
    if not isinstance(cwd, str) or "\0" in cwd or not os.path.isabs(cwd):
        raise Refusal(f"`cwd` {cwd!r} is not an absolute path")
    try:
        st = os.stat(cwd)
    except OSError as e:
        raise Refusal(f"`cwd` {cwd}: {e.strerror}") from e
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise Refusal(f"`cwd` {cwd} is not a directory of this user")
    cfg = _settings(msg.get("settings"), cwd, proxy_key)
    files = _files(msg)
    if not 0 < cfg.execute_timeout_s <= MAX_TIMEOUT_S or not 0 < cfg.queue_timeout_s:
        raise Refusal(f"settings: execute timeout must be in (0, {MAX_TIMEOUT_S:.0f}] s and queue timeout positive")
    return ActionRequest(
        argv=tuple(argv),
        cwd=Path(cwd),
        compiler=_compiler(msg.get("compiler"), digest_of),
        exec_root=cfg.exec_root,
        cache_salt=cfg.cache_salt,
        execute_timeout_s=cfg.execute_timeout_s,
        queue_timeout_s=min(cfg.queue_timeout_s, cfg.execute_timeout_s),
        files=files,
        toolchain=cfg.toolchain,
        base_system=cfg.base_system,
        platform=cfg.platform,
        download=cfg.download,
    )


def _files(msg: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """The caller's input and output paths, if it sent them: relative paths (prepare_action checks that they
    stay under the exec root and that every input is a regular file)."""
    if "inputs" not in msg and "outputs" not in msg:
        return None
    inputs, outputs = msg.get("inputs"), msg.get("outputs")
    for name, value, most in (("inputs", inputs, MAX_ARGS), ("outputs", outputs, MAX_OUTPUTS)):
        if not isinstance(value, list) or not 0 < len(value) <= most:
            raise Refusal(f"`{name}` must be a list of 1 to {most} paths")
        for p in value:
            if not isinstance(p, str) or not p or "\0" in p:
                raise Refusal(f"`{name}` entries must be non-empty strings without NUL bytes")
            if os.path.isabs(p):
                raise Refusal(f"`{name}`: {p!r} is an absolute path; remote actions take paths relative to cwd")
    return tuple(inputs), tuple(outputs)  # type: ignore[arg-type]
