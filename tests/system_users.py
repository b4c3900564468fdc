"""Real, short-lived Unix users for tests that play another local user (an attacker on a shared cache or
cluster). Created with useradd, removed with userdel (and every process of theirs killed) when the test ends,
also when it fails. Needs root, as CI runs."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"


@dataclass(frozen=True)
class User:
    name: str
    uid: int
    gid: int

    def run(self, argv: Sequence[str], **kw: object) -> subprocess.CompletedProcess[str]:
        """ARGV as this user (runuser: no password, no login shell), from /, with a minimal environment."""
        env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}
        kw.setdefault("cwd", "/")
        return subprocess.run([RUNUSER, "-u", self.name, "--", *argv], env=env, capture_output=True,
                              text=True, timeout=300, **kw)  # type: ignore[call-overload]


def user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def remove_user(name: str) -> None:
    """Kill every process of NAME, then delete the user (and its group); nothing when there is no such user."""
    subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True, check=False)
    subprocess.run(["userdel", name], capture_output=True, check=False)


def make_user(prefix: str = "gnt") -> User:
    """A new system user without a home or login shell (`remove_user` takes it away again)."""
    name = f"{prefix}{os.getpid() % 100000}"
    subprocess.run(["userdel", name], capture_output=True, check=False)  # a leftover of a killed run
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True,
                   capture_output=True)
    return user(name)


def user(name: str) -> User:
    pw = pwd.getpwnam(name)
    return User(name, pw.pw_uid, pw.pw_gid)


@contextmanager
def temporary_user(prefix: str = "gnt") -> Iterator[User]:
    """A new system user without a home or login shell, gone afterwards."""
    made = make_user(prefix)
    try:
        yield made
    finally:
        remove_user(made.name)


def python_for(user: User) -> list[str]:
    """An interpreter USER can run that imports this repository and its venv's packages: the venv's own when the
    user can run it, else Debian's python3 (same minor version) with the venv's site-packages and the repository
    on PYTHONPATH (the venv's interpreter may live under /root, with pyenv)."""
    repo = Path(__file__).resolve().parents[1]
    if user.run([sys.executable, "-c", "import grpc, goma_ext"]).returncode == 0:
        return ["env", f"PYTHONPATH={repo}", sys.executable]
    import grpc

    return ["env", f"PYTHONPATH={Path(grpc.__file__).parent.parent}:{repo}", "/usr/bin/python3"]
