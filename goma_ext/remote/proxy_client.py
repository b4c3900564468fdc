"""The thin client's side of `goma-ext proxy`: reach (or start) the user's proxy for an endpoint, run one action.

Standard library only: `goma-ext run` imports this under `python -S`. Failures come back as typed errors that
say what the caller should do: ProxyUnavailable (no proxy and none startable: run in-process), anything else
(hung, lost twice, refused, remote side failed): run locally.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from goma_ext.errors import GomaExtError
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig

if TYPE_CHECKING:
    from typing import Any

START_TIMEOUT_S = 15.0
PING_TIMEOUT_S = 5.0  # a proxy that cannot answer a ping this fast is as good as hung: start another


class ProxyError(GomaExtError):
    """The proxy could not give an answer; the action should run locally."""


class ProxyUnavailable(ProxyError):
    """No proxy answers and none could be started: the caller uses the in-process remote path."""


@dataclass(frozen=True)
class ProxyTarget:
    """Where one of this endpoint's proxies (shard SHARD of SHARDS) lives and how to start it."""

    directory: Path
    key: str
    serve_argv: tuple[str, ...]
    silence_s: float
    shard: int = 0
    shards: int = 1

    @property
    def files(self) -> dict[str, Path]:
        return {kind: Path(p) for kind, p in wire.paths(str(self.directory), self.key, self.shard).items()}

    @property
    def command(self) -> tuple[str, ...]:
        return (*self.serve_argv, "--shard", str(self.shard)) if self.shard else self.serve_argv

    def for_shard(self, shard: int) -> ProxyTarget:
        return replace(self, shard=shard % self.shards)

    def for_action(self, argv: Sequence[str]) -> ProxyTarget:
        """The shard identical actions go to (proxy_protocol.shard_of)."""
        return self.for_shard(wire.shard_of(argv, self.shards))

    def all_shards(self) -> list[ProxyTarget]:
        return [self.for_shard(k) for k in range(self.shards)]


def endpoint_key(cfg: RemoteConfig, cwd: Path, token_sha256: str | None = None) -> str:
    """The key of cfg's proxy (see proxy_protocol.endpoint_key); relative credential files are relative to cwd.
    token_sha256 stands for cfg.token when only its hash is known (a request the proxy checks)."""
    token = wire.token_hash(cfg.token) if token_sha256 is None else token_sha256
    return wire.endpoint_key(str(cwd), cfg.endpoint, cfg.instance, str(cfg.ca_file) if cfg.ca_file else None,
                             str(cfg.token_file) if cfg.token_file else None, token, cfg.headers,
                             client_cert=str(cfg.client_cert) if cfg.client_cert else None,
                             client_key=str(cfg.client_key) if cfg.client_key else None,
                             compression=cfg.compression)


def serve_argv(cfg: RemoteConfig, cwd: Path, config_file: Path | None) -> tuple[str, ...]:
    """`goma-ext proxy serve` for cfg, with absolute paths (the proxy runs in /)."""
    argv = [sys.executable, "-m", "goma_ext.cli", "proxy", "serve", "--remote", cfg.endpoint]
    if cfg.instance:
        argv += ["--instance", cfg.instance]
    if cfg.ca_file is not None:
        argv += ["--ca-file", str(cwd / cfg.ca_file)]
    if cfg.client_cert is not None and cfg.client_key is not None:
        argv += ["--client-cert", str(cwd / cfg.client_cert), "--client-key", str(cwd / cfg.client_key)]
    if cfg.token_file is not None:
        argv += ["--token-file", str(cwd / cfg.token_file)]
    if cfg.allow_insecure_credentials:
        argv += ["--allow-insecure-credentials", "true"]
    if cfg.compression != "off":
        argv += ["--compression", cfg.compression]
    if config_file is not None:
        argv += ["--config", str(cwd / config_file)]
    return tuple(argv)


def target_for(cfg: RemoteConfig, cwd: Path, env: Mapping[str, str], config_file: Path | None = None) -> ProxyTarget:
    try:
        silence = wire.silence_s(env)
    except ValueError as e:
        raise GomaExtError(f"{wire.SILENCE_ENV}={env[wire.SILENCE_ENV]!r}: not a number of seconds") from e
    try:
        shards = wire.shard_count(env)
    except ValueError as e:
        raise GomaExtError(f"{wire.SHARDS_ENV}: {e}") from e
    return ProxyTarget(Path(wire.state_dir(env)), endpoint_key(cfg, cwd), serve_argv(cfg, cwd, config_file), silence,
                       shards=shards)


def _connect(path: Path) -> socket.socket:
    return wire.connect(path)  # only a proxy of this user's


def answers(sock_path: Path, timeout_s: float = PING_TIMEOUT_S) -> bool:
    """Whether a proxy answers a ping on sock_path. A bare connect is not enough: a proxy being killed still
    accepts connections until the kernel closes its listening socket, then resets them."""
    try:
        ask(sock_path, {"op": "ping"}, timeout_s)
    except OSError:
        return False
    return True


def start(target: ProxyTarget) -> None:
    """Start the proxy unless one answers; serialized by a lock so concurrent clients start one."""
    import fcntl
    import subprocess

    files = target.files
    wire.make_state_dir(str(target.directory))
    wire.check_socket_path(str(files["sock"]))
    with open(files["lock"], "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if answers(files["sock"]):
            return  # another client started it while we waited for the lock
        files["sock"].unlink(missing_ok=True)  # stale or dying: nothing answers on it
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        env[wire.STATE_DIR_ENV] = str(target.directory)
        with open(files["log"], "ab") as log:
            proc = subprocess.Popen(list(target.command), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                    cwd="/", env=env, start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ProxyUnavailable(f"proxy exited with status {proc.returncode} at start (log: {files['log']})")
            try:
                _connect(files["sock"]).close()
                return
            except OSError:
                time.sleep(0.02)
        raise ProxyUnavailable(f"proxy did not listen within {START_TIMEOUT_S:.0f} s (log: {files['log']})")


def _open(target: ProxyTarget, replace: bool) -> socket.socket:
    """A connection to the proxy, started first if none listens. After a failed attempt (replace), the proxy
    must answer a ping first: the one that dropped us may still accept connections while it dies."""
    if not replace:
        try:
            return _connect(target.files["sock"])
        except OSError:
            pass
    try:
        start(target)
        return _connect(target.files["sock"])
    except OSError as e:
        raise ProxyUnavailable(f"cannot start a proxy in {target.directory}: {e}") from e


def call(target: ProxyTarget, message: Mapping[str, Any]) -> dict[str, Any]:
    """Send one request to the action's shard (started or replaced as needed) and return its final frame.

    A proxy that dies mid-request or speaks another version is replaced once. When the action's shard still cannot
    answer (it cannot be started, or it hung), the next shard gets the request; that one's failure is final."""
    shard = target.for_action(message.get("argv") or ())
    try:
        return _call_shard(shard, message)
    except ProxyError:
        if target.shards == 1:
            raise
    return _call_shard(shard.for_shard(shard.shard + 1), message)


def _call_shard(target: ProxyTarget, message: Mapping[str, Any]) -> dict[str, Any]:
    if wire.hung_recently(str(target.files["hung"])):
        raise ProxyError(f"proxy {target.files['sock']} stopped answering less than {wire.HUNG_HOLD_S:.0f} s ago")
    last = ""
    for _attempt in range(2):
        sock = _open(target, replace=bool(last))
        try:
            with sock:
                frame = wire.exchange(sock, message, target.silence_s)
        except TimeoutError as e:
            wire.mark_hung(str(target.files["hung"]))
            raise ProxyError(f"proxy silent for {target.silence_s:.0f} s") from e
        except (EOFError, OSError, wire.FrameError) as e:
            last = f"proxy connection lost ({e})"
            continue  # killed or crashed: the next attempt starts a new one
        if frame.get("type") == wire.MISMATCH:
            last = f"proxy speaks {frame.get('version')}, not {message.get('version')}"
            continue  # it unlinked its socket before answering and is draining: the next attempt starts ours
        return frame
    raise ProxyError(last)


def ask(sock_path: Path, message: Mapping[str, Any], timeout_s: float = 10.0) -> dict[str, Any]:
    """One control request (ping, status, stop) to the proxy at sock_path; OSError if none answers."""
    with _connect(sock_path) as sock:
        try:
            return wire.exchange(sock, message, timeout_s)
        except (EOFError, wire.FrameError) as e:
            raise OSError(f"{sock_path}: {e}") from e


def sockets(directory: Path, key: str = "") -> list[Path]:
    """The proxy sockets in a state directory: every one, or those of the endpoint KEY (all its shards)."""
    if not directory.is_dir():
        return []
    if not key:
        return sorted(directory.glob("proxy-*.sock"))
    return sorted([*directory.glob(f"proxy-{key}.sock"), *directory.glob(f"proxy-{key}-*.sock")])
