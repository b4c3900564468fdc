"""What the cluster's workers need to sandbox actions: an unprivileged runner user and a directory it can reach."""

from __future__ import annotations

import os
import pwd
import stat
import subprocess
import tempfile
from pathlib import Path

from goma_ext.cluster.postgres import ClusterError
from goma_ext.worker.cli import DEFAULT_RUNNER
from thinlto_base import safefs


def ensure_runner(name: str | None) -> str | None:
    """The user a root cluster's workers run actions as: `name` (must exist) or goma-ext-runner, created as a
    system user without home or shell when missing. None when not root (workers use their own uid)."""
    if os.geteuid() != 0:
        return name
    if name is not None:
        return name
    try:
        pwd.getpwnam(DEFAULT_RUNNER)
        return DEFAULT_RUNNER
    except KeyError:
        pass
    proc = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", DEFAULT_RUNNER],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise ClusterError(f"cannot create the action runner user {DEFAULT_RUNNER}: {proc.stderr.strip()}")
    return DEFAULT_RUNNER


def searchable_by_others(path: Path) -> bool:
    """Whether a uid other than the owner can reach `path` (every existing ancestor has o+x)."""
    for p in [path, *path.parents]:
        try:
            mode = os.stat(p).st_mode
        except FileNotFoundError:
            continue
        if not mode & stat.S_IXOTH:
            return False
    return True


def choose_sandbox_dir(state: Path) -> tuple[Path, bool]:
    """STATE/sandboxes when the runner user can reach it (and, as root, no other user can change a directory above
    it), else a fresh 0711 directory in the temp dir (True: the cluster owns it and removes it on destroy)."""
    inside = state / "sandboxes"
    if os.geteuid() != 0 or (searchable_by_others(state) and safefs.unsafe_above(inside) is None):
        return inside, False  # (as root, not below a directory another user could change: the worker refuses that)
    made = Path(tempfile.mkdtemp(prefix="goma-ext-sandboxes-"))
    os.chmod(made, 0o711)
    return made, True


def reusable_sandbox_dir(state: Path, path: str, owned: bool) -> tuple[str, bool]:
    """The sandbox directory a restarted cluster uses: PATH as it was, unless the cluster made it in the temp dir
    (OWNED) and it is now gone or no longer a private directory of ours. After a reboot emptied the temp dir,
    anyone could make a directory under the old, known name, with links in it that the worker's clean-up of
    stale boxes would follow as root; so such a directory is never taken back, and a new one is made."""
    if not owned or safefs.unsafe_dir(path) is None:
        return path, owned
    made, made_owned = choose_sandbox_dir(state)
    return str(made.resolve()), made_owned

