"""The backend step's command line: the rule's spelling of it (step_flags, socket_path) and its parser (parse_args).

    backend.py --cache DIR|--no-cache --log LOG [--policy P] [--trust W,…] [--socket SOCKET] [--launcher]
               -- [LAUNCHER… --] [--cg-opt-level=N] CLANG …

The rule (gn_thinlto.render.ninja) spells it, the Python step (backend.py) and the step server (step_server.py,
step_serving.py) read it: one module, so the spelling and the parser cannot drift apart.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

USAGE = ("usage: backend.py --cache DIR|--no-cache --log LOG [--policy POLICY] [--trust USER,…] [--socket SOCKET] "
         "[--launcher] -- [LAUNCHER… --] [--cg-opt-level=N] CLANG …")


class StepArgs:
    """The backend step's command line: cache dir ("" for none), log, launcher argv ending in `--` (or empty),
    the backend command, cache policy, trusted writers besides this user and root, and SOCKET: the step
    server's socket when the step launcher runs in front of this step (this step then starts the server)."""

    __slots__ = ("cache", "command", "launcher", "log", "policy", "socket", "trust")

    def __init__(self, cache: str, log: str, launcher: list[str], command: list[str], policy: str = "",
                 trust: Sequence[str] = (), socket: str = "") -> None:
        self.cache, self.log, self.launcher, self.command = cache, log, launcher, command
        self.policy, self.trust, self.socket = policy, list(trust), socket

    def settings(self) -> tuple[str, str, str, tuple[str, ...]]:
        """What a step server must have been started with to serve this step."""
        return self.cache, self.log, self.policy, tuple(self.trust)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StepArgs) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        return "StepArgs(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


def step_flags(cache: str, log: str, policy: str = "", trust: Sequence[str] = ()) -> list[str]:
    """The backend step's settings as its command line spells them (parse_args reads them): the rule's Python
    step, and the server started for it."""
    flags = ["--cache", cache] if cache else ["--no-cache"]
    if policy:
        flags += ["--policy", policy]
    if trust:
        flags += ["--trust", ",".join(trust)]
    return [*flags, "--log", log]


def socket_path(step_command: Sequence[str], state_dir: str) -> str:
    """The socket of the server for the backend rule whose Python step is STEP_COMMAND (interpreter, script,
    settings): in STATE_DIR (relative to the build directory, like every path in its rules), named by a digest of
    the command, so a change of settings or install never reaches a server started for other ones."""
    digest = hashlib.sha256("\0".join(step_command).encode()).hexdigest()[:12]
    return f"{state_dir}/step-{digest}.sock"


SERVERS_ENV = "GN_THINLTO_STEP_SERVER"  # the launcher tells the Python step which server's socket it chose
MAX_SERVERS = 16
# `auto`: one step server per this many cores, at most AUTO_SERVERS. A server is one Python process (the GIL), a few
# ms of CPU per remote action: at 1,000 remote cores a build directory needs 6 or more, on a 32-core machine as on a
# 64-core one (docs/benchmarks.md, "The scale model with shards").
CORES_PER_SERVER = 4
AUTO_SERVERS = 8


def default_servers(cores: int) -> int:
    """Step servers per build directory for `step_servers: auto` on a machine with CORES cores."""
    return max(1, min(AUTO_SERVERS, cores // CORES_PER_SERVER))


def server_socket(sock: str, server: int) -> str:
    """The socket of step server SERVER of the rule whose socket is SOCK: SOCK itself for the first, else SOCK with
    `.N` before its `.sock` (launcher.c spells the same)."""
    if server == 0:
        return sock
    stem = sock[: -len(".sock")] if sock.endswith(".sock") else sock
    return f"{stem}.{server}.sock"


def serves(path: str, sock: str) -> bool:
    """Whether a server listening on PATH is one of the servers of the rule whose socket is SOCK."""
    if path == sock:
        return True
    stem = sock[: -len(".sock")] if sock.endswith(".sock") else sock
    number = path[len(stem) + 1 : -len(".sock")] if path.startswith(stem + ".") and path.endswith(".sock") else ""
    return (number.isascii() and number.isdecimal() and not number.startswith("0")  # as launcher.c spells it
            and int(number) < MAX_SERVERS)


def chosen_socket(step: StepArgs, env: dict[str, str] | None = None) -> str:
    """The socket the launcher chose for STEP (it says so in GN_THINLTO_STEP_SERVER) when it is one of the rule's,
    else the rule's own: the server the Python step starts for the next edges."""
    chosen = (os.environ if env is None else env).get(SERVERS_ENV, "")
    return chosen if chosen and serves(chosen, step.socket) else step.socket


def parse_args(argv: Sequence[str]) -> StepArgs:
    """The step's arguments; ValueError on bad usage.

    Hand-parsed: the arguments come from our own ninja rule, and argparse's import costs more than a hit.
    """
    opts: dict[str, str] = {}
    launched = False
    rest = list(argv)
    while rest and rest[0] != "--":
        flag = rest.pop(0)
        if flag == "--launcher":
            launched = True
        elif flag == "--no-cache":
            opts["--cache"] = ""
        elif flag in ("--cache", "--log", "--policy", "--trust", "--socket") and rest:
            opts[flag] = rest.pop(0)
        else:
            raise ValueError(f"unexpected argument {flag!r}")
    if "--cache" not in opts or "--log" not in opts:
        raise ValueError("--cache (or --no-cache) and --log are required")
    command = rest[1:]
    launcher: list[str] = []
    if launched:
        if "--" not in command:
            raise ValueError("--launcher given but the launcher has no closing `--`")
        split = command.index("--") + 1
        launcher, command = command[:split], command[split:]
    trust = [w for w in opts.get("--trust", "").split(",") if w]
    return StepArgs(opts["--cache"], opts["--log"], launcher, command, opts.get("--policy", ""), trust,
                    opts.get("--socket", ""))
