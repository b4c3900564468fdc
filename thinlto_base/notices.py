"""Warnings said once per build, not once per backend: ninja runs a step per edge, so a marker file in the
build's state directory records the build (the ninja process that started the step) that already said it.
Standard library only."""

from __future__ import annotations

import os
import sys

from thinlto_base.safefs import open_nofollow, read_regular

MAX_HOPS = 8  # ninja → sh → python (→ a launcher): the first ninja among a few ancestors


def _stat_fields(pid: int) -> tuple[str, list[str]]:
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)  # (procfs files stat as empty)
    try:
        text = os.read(fd, 4096).decode(errors="replace")
    finally:
        os.close(fd)
    comm_end = text.rindex(")")
    return text[text.index("(") + 1:comm_end], text[comm_end + 2:].split()


def _no_requester() -> int:
    return 0


# The process a step runs for, when that is not this process's parent: the step server (gn_thinlto.steps) sets
# it to the pid of the launcher it serves, so "the build" is still the ninja that started that launcher.
requester = _no_requester


def build_id() -> str:
    """The nearest ninja ancestor (of the requester, else of this process) as `PID:START` (its start time tells
    a reused pid apart), else the first process looked at."""
    pid = requester() or os.getppid()
    first = ""
    try:
        for _ in range(MAX_HOPS):
            comm, rest = _stat_fields(pid)
            here = f"{pid}:{rest[19]}"  # field 22, starttime (fields after the comm start at 3)
            first = first or here
            if comm.startswith("ninja"):
                return here
            pid = int(rest[1])  # field 4, ppid
            if pid <= 1:
                break
    except (OSError, ValueError, IndexError):
        pass
    return first or str(os.getppid())


def say(message: str) -> None:
    print(f"gn-thinlto: warning: backend cache: {message}", file=sys.stderr)


def once_per_build(state_dir: str, topic: str, subject: str, message: str, said: set[str]) -> None:
    """Say MESSAGE unless this build already said TOPIC about SUBJECT (a line in STATE_DIR's marker; without a
    STATE_DIR, the set SAID of this process)."""
    if not state_dir:
        if subject not in said:
            said.add(subject)
            say(message)
        return
    line = f"{build_id()} {subject}"
    marker = f"backend-cache.{topic}"
    try:
        dir_fd = os.open(state_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        say(message)
        return
    try:
        import fcntl

        fd = open_nofollow(marker, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666, dir_fd=dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # read, decide and append as one: two steps at once say it once
            seen = read_regular(marker, dir_fd, 1 << 16)[0].decode(errors="replace").splitlines()
            if line in seen:
                return
            say(message)
            if len(seen) > 100:
                os.ftruncate(fd, 0)
            os.write(fd, f"{line}\n".encode())
        finally:
            os.close(fd)
    except OSError:
        pass  # a marker we cannot keep costs a repeated warning, never the build
    finally:
        os.close(dir_fd)
