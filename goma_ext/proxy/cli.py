"""`goma-ext proxy start|stop|status|serve`: manage the user's proxies (the thin client starts them on demand)."""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import replace
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.proxy.limits import (
    DEFAULT_IDLE_S,
    DEFAULT_MAX_ACTIVE,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_REQUEST_TIMEOUT_S,
    Limits,
)
from goma_ext.remote import proxy_client
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.wrapper import add_settings_arguments, config_from_args

IDLE_ENV = "GOMA_EXT_PROXY_IDLE_TIMEOUT"
MAX_ACTIVE_ENV = "GOMA_EXT_PROXY_MAX_ACTIVE"
MAX_CONNECTIONS_ENV = "GOMA_EXT_PROXY_MAX_CONNECTIONS"
REQUEST_TIMEOUT_ENV = "GOMA_EXT_PROXY_REQUEST_TIMEOUT"
# (NAME, DEFAULT, MEANING) for docs/reference/environment.md; `goma-ext proxy serve`'s options win over each.
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    (IDLE_ENV, f"`{DEFAULT_IDLE_S:g}`", "a proxy stops after this many seconds without requests"),
    (MAX_ACTIVE_ENV, f"`{DEFAULT_MAX_ACTIVE}`", "actions a proxy works on at once (more wait in its queue)"),
    (MAX_CONNECTIONS_ENV, f"`{DEFAULT_MAX_CONNECTIONS}`", "client connections a proxy keeps open at once; more are "
                                                        "refused"),
    (REQUEST_TIMEOUT_ENV, f"`{DEFAULT_REQUEST_TIMEOUT_S:g}`", "seconds a proxy gives a client from connect to a "
                                                            "complete request"),
)


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser("proxy", help="the long-lived local proxy that `goma-ext run` hands remote actions to",
                            description=__doc__)
    sub = p.add_subparsers(dest="proxy_command", required=True, metavar="{start,stop,status,serve}")
    for name, fn, text in (
        ("start", start, "start the proxy for the configured endpoint (if none runs) and print its pid"),
        ("stop", stop, "stop the proxy for the configured endpoint, or every proxy of this user"),
        ("status", status, "print what each running proxy has done"),
        ("serve", serve, "run a proxy in the foreground (what `start` and the thin client spawn)"),
    ):
        q = sub.add_parser(name, help=text, description=text)
        add_settings_arguments(q)
        q.set_defaults(run=fn)
        if name == "status":
            q.add_argument("--json", action="store_true", help="print the figures as JSON")
        if name == "serve":
            q.add_argument("--shard", type=int, default=0, metavar="S",
                           help=f"serve shard S of the endpoint (0 to {wire.MAX_SHARDS - 1}; see {wire.SHARDS_ENV})")
            q.add_argument("--idle-timeout", type=float, metavar="S",
                           help=f"stop after S seconds without requests (default {IDLE_ENV} or 600)")
            q.add_argument("--max-active", type=int, metavar="N",
                           help=f"actions worked on at once (default {MAX_ACTIVE_ENV} or 256)")
            q.add_argument("--max-connections", type=int, metavar="N",
                           help=f"client connections open at once; more are refused (default {MAX_CONNECTIONS_ENV} "
                                "or 2048)")
            q.add_argument("--request-timeout", type=float, metavar="S",
                           help=f"seconds from connect to a complete request (default {REQUEST_TIMEOUT_ENV} or 10)")


def _config(args: argparse.Namespace, required: bool) -> RemoteConfig | None:
    cfg = config_from_args(args, os.environ)
    if cfg is None and required:
        raise GomaExtError("proxy: no remote endpoint (give --remote URL or set GOMA_EXT_REMOTE)")
    return cfg


def _selected(args: argparse.Namespace) -> list[Path]:
    """The sockets of the configured endpoint's shards, or every socket in the state directory."""
    cfg = _config(args, required=False)
    directory = Path(wire.state_dir(os.environ))
    if cfg is None:
        return proxy_client.sockets(directory)
    target = proxy_client.target_for(cfg, Path.cwd(), os.environ, args.config)
    return proxy_client.sockets(directory, target.key)


def start(args: argparse.Namespace) -> int:
    """Start every shard of the configured endpoint that is not running."""
    cfg = _config(args, required=True)
    assert cfg is not None
    for target in proxy_client.target_for(cfg, Path.cwd(), os.environ, args.config).all_shards():
        try:
            proxy_client.start(target)
            answer = proxy_client.ask(target.files["sock"], {"op": "ping"})
        except OSError as e:
            raise GomaExtError(f"proxy: cannot start shard {target.shard}: {e}") from e
        print(f"proxy for {cfg.endpoint} (shard {target.shard} of {target.shards}): pid {answer.get('pid')}, "
              f"version {answer.get('version')}, socket {target.files['sock']}")
    return 0


def stop(args: argparse.Namespace) -> int:
    stopped = 0
    for sock in _selected(args):
        try:
            answer = proxy_client.ask(sock, {"op": "stop"})
        except OSError:
            continue
        pid = int(answer.get("pid", 0))
        pid_file = sock.with_suffix(".pid")  # the proxy removes it as it exits, after draining
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _names(pid_file, pid):
            time.sleep(0.05)
        print(f"stopped proxy pid {pid} ({sock.name})")
        stopped += 1
    if not stopped:
        print("no proxy running")
    return 0


def _names(pid_file: Path, pid: int) -> bool:
    try:
        return pid_file.read_text().strip() == str(pid)
    except OSError:
        return False


def status(args: argparse.Namespace) -> int:
    found = []
    for sock in _selected(args):
        try:
            found.append({"socket": str(sock), **proxy_client.ask(sock, {"op": "status"})})
        except OSError:
            continue
    for entry in found:
        entry.pop("type", None)
    if args.json:
        print(json.dumps(found, indent=2, sort_keys=True))
        return 0
    if not found:
        print("no proxy running")
    for e in found:
        modes = ", ".join(f"{k[len('actions_'):]} {v}" for k, v in sorted(e.items()) if k.startswith("actions_"))
        print(f"pid {e['pid']} {e['endpoint']} shard {e.get('shard', 0)} (version {e['version']}): "
              f"up {e['uptime_s']:.0f} s, "
              f"cpu {e['cpu_s']:.1f} s, {e.get('runs', 0)} actions ({modes or 'none finished'}), "
              f"{e['active']} active (peak {e['peak_active']}), {e.get('refused', 0)} refused, "
              f"{e.get('connections', 0)} connections (peak {e.get('peak_connections', 0)}), "
              f"{e.get('timed_out', 0)} timed out, {e.get('busy_refused', 0)} refused at the connection cap")
    if len(found) > 1:
        runs = sum(e.get("runs", 0) for e in found)
        cpu = sum(e["cpu_s"] for e in found)
        print(f"total: {len(found)} proxies, cpu {cpu:.1f} s, {runs} actions"
              + (f", {1000 * cpu / runs:.2f} ms cpu per action" if runs else ""))
    return 0


def _setting(value: float | None, env: str, default: float, kind: type[float] | type[int]) -> float:
    if value is not None:
        return value
    text = os.environ.get(env)
    if text is None:
        return default
    try:
        return kind(text)
    except ValueError as e:
        raise GomaExtError(f"proxy: {env}={text!r}: not a{'n integer' if kind is int else ' number'}") from e


def _limits(args: argparse.Namespace) -> tuple[float, Limits]:
    """The idle timeout and the limits from the command line, else the environment, else the defaults."""
    idle = _setting(args.idle_timeout, IDLE_ENV, DEFAULT_IDLE_S, float)
    limits = Limits(max_active=int(_setting(args.max_active, MAX_ACTIVE_ENV, DEFAULT_MAX_ACTIVE, int)),
                    max_connections=int(_setting(args.max_connections, MAX_CONNECTIONS_ENV, DEFAULT_MAX_CONNECTIONS,
                                                 int)),
                    request_timeout_s=_setting(args.request_timeout, REQUEST_TIMEOUT_ENV, DEFAULT_REQUEST_TIMEOUT_S,
                                               float))
    if idle <= 0 or limits.request_timeout_s <= 0:
        raise GomaExtError("proxy: --idle-timeout and --request-timeout must be positive")
    if limits.max_active < 1 or limits.max_connections < 1:
        raise GomaExtError("proxy: --max-active and --max-connections must be at least 1")
    return idle, limits


def serve(args: argparse.Namespace) -> int:
    cfg = _config(args, required=True)
    assert cfg is not None
    cwd = Path.cwd()
    cfg = replace(cfg, ca_file=cwd / cfg.ca_file if cfg.ca_file else None,
                  client_cert=cwd / cfg.client_cert if cfg.client_cert else None,
                  client_key=cwd / cfg.client_key if cfg.client_key else None,
                  token_file=cwd / cfg.token_file if cfg.token_file else None)
    if not 0 <= args.shard < wire.MAX_SHARDS:
        raise GomaExtError(f"proxy: --shard {args.shard}: expected 0 to {wire.MAX_SHARDS - 1}")
    target = replace(proxy_client.target_for(cfg, cwd, os.environ, args.config), shard=args.shard)
    sock = target.files["sock"]
    idle, limits = _limits(args)
    from goma_ext.proxy.server import Proxy

    try:
        wire.make_state_dir(str(target.directory))
        wire.check_socket_path(str(sock))
        if proxy_client.answers(sock, timeout_s=2):
            raise GomaExtError(f"proxy: one already listens on {sock}")
        sock.unlink(missing_ok=True)
        proxy = Proxy(cfg, target.key, sock, idle, limits, target.shard)
        target.files["pid"].write_text(f"{os.getpid()}\n")
    except OSError as e:
        raise GomaExtError(f"proxy: {e}") from e
    os.chdir("/")
    try:
        proxy.serve()
    finally:
        try:
            if target.files["pid"].read_text().strip() == str(os.getpid()):
                target.files["pid"].unlink()
        except OSError:
            pass
    return 0
