"""An unprivileged local user who sends hand-made actions to the test cluster (tests/remote/attack_client.py): the
attack suites' player. Needs root to create the user."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tests.remote.conftest import INSTANCE, Cluster
from tests.system_users import User, python_for

CLIENT = Path(__file__).with_name("attack_client.py")


class Attacker:
    """An unprivileged local user with a private directory, sending actions to the cluster."""

    def __init__(self, user: User, home: Path, cluster: Cluster) -> None:
        self.user, self.home, self.cluster = user, home, cluster
        self.n = 0
        self.python = python_for(user)
        self.token = self.put("client.token", cluster.token_file.read_bytes())  # admitted: the attacks are on workers
        self.token.chmod(0o600)  # a client refuses a token file others may read

    def put(self, name: str, data: bytes) -> Path:
        path = self.home / name
        path.write_bytes(data)
        os.chown(path, self.user.uid, self.user.gid)
        return path

    def send(self, argv: list[str], files: dict[str, Path], outputs: tuple[str, ...] = ("a.o",),
             **tree: Any) -> dict[str, Any]:
        """Run ARGV on FILES (tree path -> local file); TREE: executable, links, bomb, workdir, env, timeout_s (see
        attack_client.py). The outcome: exit_code, stdout, stderr, outputs, output_data, worker, or error_code and
        error when the execution failed."""
        self.n += 1
        salt = f"attack-{os.getpid()}-{time.time_ns()}"  # never an action-cache hit
        spec = {"endpoint": self.cluster.endpoint, "instance": INSTANCE, "salt": salt, "argv": argv,
                "files": {k: str(v) for k, v in files.items()}, "outputs": list(outputs), "token_file": str(self.token),
                **tree}
        spec_file = self.put(f"spec{self.n}.json", json.dumps(spec).encode())
        proc = self.user.run([*self.python, str(CLIENT), str(spec_file)])
        assert proc.returncode == 0, proc.stderr[-2000:]
        out: dict[str, Any] = json.loads(proc.stdout)
        print(f"{argv[1:]} -> {json.dumps(out)[:600]}")
        return out
