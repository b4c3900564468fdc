"""An attacker's REAPI client: run as an unprivileged local user by test_sandbox_attacks.py, it sends one hand-made
action (any argv, absolute paths included: it skips the checks of goma-ext's own client) and prints the outcome as
JSON. Usage: python attack_client.py SPEC.json (endpoint, instance, salt, argv, files {name: path}, outputs,
token_file: the attacker's own copy of the cluster's client token, as a user the cluster admits would have)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from goma_ext.remote import action, execution
from goma_ext.remote.client import RemoteExecutor
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.digest import Digest, serialize
from goma_ext.remote.errors import RemoteError
from goma_ext.remote.identity import identify
from goma_ext.remote.merkle import BlobSource
from goma_ext.remote.proto import re_pb2


def attack(spec: dict[str, object]) -> dict[str, object]:
    token = spec.get("token_file")
    cfg = RemoteConfig(endpoint=str(spec["endpoint"]), instance=str(spec["instance"]), cache_salt=str(spec["salt"]),
                       max_attempts=1, token_file=Path(str(token)) if token else None)
    ex = RemoteExecutor(cfg)
    try:
        files = {name: Path(path).read_bytes() for name, path in dict(spec["files"]).items()}  # type: ignore[call-overload]
        nodes = [re_pb2.FileNode(name=n, digest=Digest.of_bytes(b).to_proto()) for n, b in sorted(files.items())]
        root = re_pb2.Directory(files=nodes)
        blobs = {Digest.of_bytes(b): BlobSource(data=b) for b in files.values()}
        blobs[Digest.of_message(root)] = BlobSource(data=serialize(root))
        argv = tuple(str(a) for a in spec["argv"])  # type: ignore[attr-defined]
        clang = identify(argv[0], Path(tempfile.gettempdir()))
        built = action.build(action.ActionSpec(argv, "", tuple(spec["outputs"]), clang.properties(),  # type: ignore[arg-type]
                                               Digest.of_message(root), timeout_s=120, salt=cfg.cache_salt.encode()))
        blobs[built.command_digest] = BlobSource(data=built.command)
        blobs[built.action_digest] = BlobSource(data=built.action)
        ex.cas.upload(blobs)
        resp = execution.execute(ex.channel, cfg.instance, ex.metadata, built.action_digest, ex.policy, 180)
        res = resp.result

        def read(d: re_pb2.Digest) -> str:
            return ex.cas.read(Digest.from_proto(d)).decode(errors="replace") if d.hash else ""

        return {"exit_code": res.exit_code, "stdout": read(res.stdout_digest), "stderr": read(res.stderr_digest),
                "outputs": sorted(f.path for f in res.output_files), "worker": res.execution_metadata.worker}
    except RemoteError as e:
        return {"error_code": e.code, "error": str(e)}
    finally:
        ex.close()


if __name__ == "__main__":
    print(json.dumps(attack(json.loads(Path(sys.argv[1]).read_text()))))
