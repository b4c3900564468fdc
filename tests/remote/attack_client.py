"""An attacker's REAPI client: run as an unprivileged local user by test_sandbox_attacks.py, it sends one hand-made
action (any argv, absolute paths included: it skips the checks of goma-ext's own client) and prints the outcome as
JSON. Usage: python attack_client.py SPEC.json, where SPEC holds: endpoint, instance, salt, argv, outputs,
token_file (the attacker's own copy of the cluster's client token, as a user the cluster admits would have), and
the input tree: files {tree path: local path} (paths may hold '/'), executable [tree paths], links {tree path:
target}, named {tree path: [hash, size]} (a file whose digest is given as it is, no blob), bomb [width, depth] (a directory `bomb` whose every level names the one below `width` times), plus
optional workdir, env {name: value} and timeout_s. An argv[0] holding '/' is a program from the input root (a
hermetic action: no compiler identity is asked for)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from goma_ext.reapi import action, execution
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.client import RemoteExecutor
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.identity import OS_FAMILY, PROP_OS, identify
from tests import input_trees


def _dir(spec: dict[str, Any], blobs: dict[Digest, BlobSource]) -> Digest:
    """The input root of SPEC's files, links and bomb, its blobs added to BLOBS."""
    tree: dict[str, Any] = {}

    def place(path: str, node: object) -> None:
        *parents, name = path.split("/")
        d = tree
        for p in parents:
            d = d.setdefault(p, {})
        d[name] = node

    def put(d: Digest, data: bytes) -> None:
        blobs[d] = BlobSource(data=data)

    executable = set(spec.get("executable", []))
    for path, local in spec.get("files", {}).items():
        place(path, ("file", Path(local).read_bytes(), path in executable))
    for path, target in spec.get("links", {}).items():
        place(path, ("link", target))
    for path, (digest_hash, size) in spec.get("named", {}).items():
        place(path, ("named", digest_hash, size))
    if "bomb" in spec:
        width, depth = spec["bomb"]
        below = input_trees.stored(re_pb2.Directory(), put)
        for _ in range(depth):
            below = input_trees.stored(re_pb2.Directory(directories=[
                re_pb2.DirectoryNode(name=f"c{i}", digest=below.to_proto()) for i in range(width)]), put)
        place("bomb", ("digest", below))
    return input_trees.build(tree, put)


def attack(spec: dict[str, Any]) -> dict[str, object]:
    token = spec.get("token_file")
    cfg = RemoteConfig(endpoint=str(spec["endpoint"]), instance=str(spec["instance"]), cache_salt=str(spec["salt"]),
                       max_attempts=1, token_file=Path(str(token)) if token else None)
    ex = RemoteExecutor(cfg)
    try:
        blobs: dict[Digest, BlobSource] = {}
        root = _dir(spec, blobs)
        argv = tuple(str(a) for a in spec["argv"])
        if "/" in argv[0]:
            props: tuple[tuple[str, str], ...] = ((PROP_OS, OS_FAMILY),)
        else:
            props = identify(argv[0], Path(tempfile.gettempdir())).properties()
        built = action.build(action.ActionSpec(
            argv, spec.get("workdir", ""), tuple(spec["outputs"]), props, root,
            timeout_s=int(spec.get("timeout_s", 120)), salt=cfg.cache_salt.encode(),
            environment=tuple(sorted(spec.get("env", {}).items()))))
        blobs[built.command_digest] = BlobSource(data=built.command)
        blobs[built.action_digest] = BlobSource(data=built.action)
        ex.cas.upload(blobs)
        resp = execution.execute(ex.channel, cfg.instance, ex.metadata, built.action_digest, ex.policy, 180)
        res = resp.result

        def read(d: re_pb2.Digest) -> str:
            return ex.cas.read(Digest.from_proto(d)).decode(errors="replace") if d.hash else ""

        return {"exit_code": res.exit_code, "stdout": read(res.stdout_digest), "stderr": read(res.stderr_digest),
                "outputs": sorted(f.path for f in res.output_files),
                "output_data": {f.path: read(f.digest) for f in res.output_files},
                "worker": res.execution_metadata.worker}
    except RemoteError as e:
        return {"error_code": e.code, "error": str(e)}
    finally:
        ex.close()


if __name__ == "__main__":
    print(json.dumps(attack(json.loads(Path(sys.argv[1]).read_text()))))
