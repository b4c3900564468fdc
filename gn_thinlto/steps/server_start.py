"""Starting the build directory's step server: its script run by path (`python -S …/step_server.py --socket …`),
detached from the build. The Python step calls start_server when the step launcher in front of it found no server;
nothing here imports the server's code, which loads only in the server's own process."""

from __future__ import annotations

import os
import sys

from gn_thinlto.steps.step_args import StepArgs, step_flags
from thinlto_base.store import FAULT_ENV

SERVER_SCRIPT = "step_server.py"  # beside this module


def start_server(step: StepArgs, sock: str = "") -> None:
    """Start a server on SOCK (default: STEP's socket; else one of the rule's servers, step_args.server_socket)
    unless one runs (its lock is held), detached from the build: a new session, no descriptor of ninja's (ninja
    waits for its output pipes to close), output to SOCK.log. The lock is taken here and handed to the server, so
    that the steps that find no server while it starts (every edge ninja runs at once) do not each start one."""
    sock = sock or step.socket
    if os.environ.get(FAULT_ENV):
        return  # fault injection is for this step, not for a server that outlives it
    import fcntl  # here, not above: the steps that start no server (nearly all) do not pay for these imports
    import stat
    import subprocess

    try:
        lock = os.open(f"{sock}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return
    log = -1
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        log = os.open(f"{sock}.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
                      | os.O_CLOEXEC, 0o600)
        if not stat.S_ISREG(os.fstat(log).st_mode):
            return  # something planted there: no server, every edge runs the step itself
        flags = step_flags(step.cache, step.log, step.policy, step.trust)
        server = os.path.join(os.path.dirname(os.path.realpath(__file__)), SERVER_SCRIPT)
        subprocess.Popen([sys.executable, "-S", server, "--socket", sock, "--lock-fd", str(lock), *flags],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, close_fds=True,
                         pass_fds=(lock,))
    except OSError:
        return  # a server runs (or is starting); or none can: every edge runs the step itself
    finally:
        if log >= 0:
            os.close(log)
        os.close(lock)  # the server's copy keeps the lock
