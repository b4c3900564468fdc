"""The step server: one Python process per build directory that runs the backend steps the step launcher
(`launcher.c`, compiled by the hook) hands it, so that a backend edge costs a small C process and one request,
not a Python interpreter's start-up (~20 ms, the largest part of a cache hit: docs/benchmarks.md, [lean]).

    python -S …/gn_thinlto/steps/step_server.py --socket SOCKET [--idle SECONDS] STEP SETTINGS…

What it runs is the backend step itself (gn_thinlto.steps.backend.serve): the same cache keys, verified hits,
miss locks, write-if-changed outputs, log lines and pruning. Only the compiler runs elsewhere: the server sends
its command to the launcher, which runs it with ninja's streams (its diagnostics are the edge's output, ninja's
job control and interrupt reach it) and reports its exit status.

Lifetime and safety:
- The Python step starts it (server_start.start_server, which runs this file by its path) when the launcher in
  front of it found no server; after that, every backend edge of the build directory goes to it. At most one
  per socket: it holds SOCKET.lock for its life.
- It leaves when idle for --idle seconds (60), when its socket is removed or replaced (the build directory
  went away), or when its own code changed (an upgrade): the next edge's launcher finds no server and the step
  starts a new one.
- The socket is created 0600 in the build directory, and a connection from any other user is closed unread;
  the launcher, in turn, talks only to a server of its own user (SO_PEERCRED both ways).
- A request whose settings (cache, log, policy, trusted writers), working directory or step script differ from
  the server's is answered `F`: the launcher runs the Python step itself.
- A remote step (`--launcher`: goma-ext's thin client in front of the compiler) is served too. The thin client
  is a module of the same install, so the server calls it in its own process (`answer`, with the launcher's
  environment): a remote action costs the proxy round trip, not an interpreter's start-up. When it hands over
  (no proxy yet, a remote failure: the full client's cases), the launcher runs the launcher command itself.
- A launcher that goes away mid-step (ninja interrupted) ends that step's thread: its miss lock is released and
  its temporary files removed. A server killed mid-step leaves what a killed Python step would leave (nothing
  the cache or the next build takes for good: fault-safety is the backend step's), and its launchers run the
  step themselves.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run as a script (see render.step_command)
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# The imports below come after the script-mode path set-up above.
from collections.abc import Sequence

from gn_thinlto.steps.step_args import parse_args
from gn_thinlto.steps.step_serving import StepServer

IDLE_S = 60.0
USAGE = ("usage: step_server.py --socket SOCKET [--idle SECONDS] [--lock-fd FD] --cache DIR|--no-cache --log LOG "
         "[--policy P] [--trust W]")


def main(argv: Sequence[str] | None = None) -> int:
    rest = list(sys.argv[1:] if argv is None else argv)
    sock, idle, lock_fd = "", IDLE_S, -1
    try:
        while rest and rest[0] in ("--socket", "--idle", "--lock-fd"):
            flag, value = rest.pop(0), rest.pop(0)
            if flag == "--socket":
                sock = value
            elif flag == "--lock-fd":
                lock_fd = int(value)
            else:
                idle = float(value)
        step = parse_args([*rest, "--"])
    except (ValueError, IndexError) as e:
        print(f"gn-thinlto: error: step server: {e} ({USAGE})", file=sys.stderr)
        return 2
    if not sock:
        print(f"gn-thinlto: error: step server: --socket is required ({USAGE})", file=sys.stderr)
        return 2
    server = StepServer(sock, step, idle, lock_fd)
    if not server.start():
        return 0  # another server holds the socket's lock
    server.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
