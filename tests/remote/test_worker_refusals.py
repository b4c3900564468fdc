"""The worker refuses non-compilers and paths escaping its sandbox with a clear status, and keeps serving."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from goma_ext.reapi import action, execution
from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.client import RemoteExecutor
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.identity import CompilerIdentity, identify
from tests.remote.conftest import INSTANCE, Cluster


@pytest.fixture
def executor(cluster: Cluster, salt: str) -> Iterator[RemoteExecutor]:
    ex = RemoteExecutor(RemoteConfig(  # the allow-list of host compilers: actions naming a program (toolchain: host)
        endpoint=cluster.endpoint, instance=INSTANCE, cache_salt=salt, max_attempts=2, token_file=cluster.token_file,
        toolchain="host",
    ))
    yield ex
    ex.close()


@pytest.fixture
def clang(tmp_path: Path) -> CompilerIdentity:
    return identify("clang-19", tmp_path)


def _run_raw(ex: RemoteExecutor, clang: CompilerIdentity, root: re_pb2.Directory, extra: list[re_pb2.Directory],
             argv: tuple[str, ...], outputs: tuple[str, ...] = ("x.o",)) -> re_pb2.ExecuteResponse:
    """Upload a hand-made input tree (which the client itself would never build) and execute it."""
    blobs = {Digest.of_message(d): BlobSource(data=serialize(d)) for d in [root, *extra]}
    blobs[Digest.of_bytes(b"data")] = BlobSource(data=b"data")
    spec = action.ActionSpec(
        argv, "", outputs, clang.properties(), Digest.of_message(root), salt=ex.cfg.cache_salt.encode()
    )
    built = action.build(spec)
    blobs[built.command_digest] = BlobSource(data=built.command)
    blobs[built.action_digest] = BlobSource(data=built.action)
    ex.cas.upload(blobs)
    return execution.execute(ex.channel, ex.cfg.instance, ex.metadata, built.action_digest, ex.policy, 60)


def _expect_refusal(code: str, fn: object) -> str:
    with pytest.raises(RemoteError) as e:
        fn()  # type: ignore[operator]
    assert e.value.code == code, e.value
    assert "refused" in str(e.value)
    return str(e.value)


def test_non_compiler_program_is_refused(executor: RemoteExecutor, clang: CompilerIdentity, tmp_path: Path) -> None:
    msg = _expect_refusal("PERMISSION_DENIED", lambda: executor.run(["sh", "-c", "id"], tmp_path, [], [], clang))
    assert "not an allow-listed compiler" in msg


def test_compiler_with_another_identity_is_refused(executor: RemoteExecutor, tmp_path: Path) -> None:
    fake = CompilerIdentity(Path("/x"), "clang version 0", "00" * 32)
    cfg = RemoteConfig(
        endpoint=executor.cfg.endpoint, instance=INSTANCE, queue_timeout_s=1, max_attempts=1,
        cache_salt=executor.cfg.cache_salt, token_file=executor.cfg.token_file, toolchain="host",
    )
    with pytest.raises(RemoteError) as e:  # no worker advertises this identity: it is never started
        RemoteExecutor(cfg).run(["clang-19", "--version"], tmp_path, [], [], fake)
    assert e.value.code == "QUEUED" and e.value.temporary


def test_input_symlink_escaping_the_sandbox_is_refused(executor: RemoteExecutor, clang: CompilerIdentity) -> None:
    root = re_pb2.Directory(symlinks=[re_pb2.SymlinkNode(name="in.bc", target="../../../etc/passwd")])
    _expect_refusal("INVALID_ARGUMENT", lambda: _run_raw(executor, clang, root, [], ("clang-19", "-c", "in.bc")))


def test_input_named_dotdot_is_refused(executor: RemoteExecutor, clang: CompilerIdentity) -> None:
    inner = re_pb2.Directory(files=[re_pb2.FileNode(name="passwd", digest=Digest.of_bytes(b"data").to_proto())])
    root = re_pb2.Directory(directories=[re_pb2.DirectoryNode(name="..", digest=Digest.of_message(inner).to_proto())])
    _expect_refusal("INVALID_ARGUMENT", lambda: _run_raw(executor, clang, root, [inner], ("clang-19", "-c", "x")))


def test_output_path_escaping_the_sandbox_is_refused(executor: RemoteExecutor, clang: CompilerIdentity) -> None:
    root = re_pb2.Directory()
    _expect_refusal(
        "INVALID_ARGUMENT",
        lambda: _run_raw(executor, clang, root, [], ("clang-19", "--version"), outputs=("../../escaped.o",)),
    )


def test_worker_still_serves_after_refusals(executor: RemoteExecutor, clang: CompilerIdentity, tmp_path: Path) -> None:
    _expect_refusal("PERMISSION_DENIED", lambda: executor.run(["sh", "-c", "id"], tmp_path, [], [], clang))
    res = executor.run(["clang-19", "--version"], tmp_path, [], [], clang)
    assert res.exit_code == 0 and b"clang version" in res.stdout
