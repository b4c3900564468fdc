"""Worker policy: only allow-listed compilers with a matching identity; no path leaves the sandbox."""

from __future__ import annotations

from pathlib import Path

import pytest

from goma_ext.reapi.proto import code_pb2, re_pb2
from goma_ext.remote.identity import CompilerIdentity
from goma_ext.worker.errors import Refusal
from goma_ext.worker.exec_root import check_name, inside
from goma_ext.worker.policy import Allowlist

CLANG = CompilerIdentity(Path("/usr/lib/llvm-19/bin/clang"), "clang version 19", "ab" * 32)
CLANG22 = CompilerIdentity(Path("/usr/lib/llvm-22/bin/clang"), "clang version 22", "cd" * 32)
ALLOW = Allowlist({"clang-19": (CLANG,), "clang": (CLANG, CLANG22)})


def _cmd(*argv: str, sha: str = CLANG.sha256, version: str = CLANG.version) -> tuple[re_pb2.Command, re_pb2.Platform]:
    platform = re_pb2.Platform(properties=[
        re_pb2.Platform.Property(name="compiler-sha256", value=sha),
        re_pb2.Platform.Property(name="compiler-version", value=version),
    ])
    return re_pb2.Command(arguments=list(argv)), platform


def test_allow_listed_compiler_with_matching_identity_resolves_to_the_local_binary() -> None:
    assert ALLOW.resolve(*_cmd("clang-19", "-c")) == CLANG.path
    assert ALLOW.resolve(*_cmd("clang", sha=CLANG22.sha256, version=CLANG22.version)) == CLANG22.path
    assert ("compiler-sha256", CLANG.sha256) in ALLOW.properties()


@pytest.mark.parametrize(
    "cmd",
    [_cmd("sh", "-c", "id"), _cmd("/usr/lib/llvm-19/bin/clang"), _cmd("../clang-19"), _cmd(),
     _cmd("clang-19", sha="00" * 32), _cmd("clang-19", version="clang version 18")],
)
def test_other_programs_and_identities_are_refused(cmd: tuple[re_pb2.Command, re_pb2.Platform]) -> None:
    with pytest.raises(Refusal) as e:
        ALLOW.resolve(*cmd)
    assert e.value.code == code_pb2.PERMISSION_DENIED


@pytest.mark.parametrize("rel", ["/etc/passwd", "..", "../x", "a/../../x"])
def test_paths_escaping_the_sandbox_are_refused(tmp_path: Path, rel: str) -> None:
    with pytest.raises(Refusal) as e:
        inside(tmp_path, rel, "output")
    assert e.value.code == code_pb2.INVALID_ARGUMENT


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "a\0b"])
def test_bad_tree_names_are_refused(name: str) -> None:
    with pytest.raises(Refusal):
        check_name(name)
