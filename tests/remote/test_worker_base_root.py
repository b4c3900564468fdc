"""Hermetic actions end to end: a real BuildGrid cluster whose worker runs on a base root (`goma-ext worker
base-root`: libc6, libgcc-s1, libstdc++6 and nothing else of the host) compiles with a clang-19 shipped in the
input root (laid out as the client's toolchain contract says) byte-identically to a local compile; a program
from the input root shows that the sandbox holds no LLVM; another container-image is FAILED_PRECONDITION. The
session cluster (host layout, allow-listed compilers) runs the same kind of action."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import pytest

from goma_ext.cluster import manager, tokens
from goma_ext.reapi import execution, merkle
from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.errors import RemoteError
from goma_ext.reapi.merkle import BlobSource
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.client import RemoteExecutor
from goma_ext.remote.config import RemoteConfig
from goma_ext.worker import baseroot
from tests.conftest import REPO
from tests.remote.conftest import INSTANCE, TEST_POLL_S, Cluster
from tests.system_users import temporary_user

CLANG = Path("/usr/lib/llvm-19/bin/clang")
LS = Path("/usr/bin/ls")
IMAGE = "goma-ext-base-root:debian12-cc"
WORKDIR = "out/Default"
HELLO_C = b"int twice(int x) { return 2 * x; }\nconst char *greeting(void) { return \"hello, hermetic\"; }\n"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: ldconfig -r chroots, the runner is a temporary user"),
    pytest.mark.skipif(not CLANG.exists() or shutil.which("bwrap") is None, reason="needs clang-19 and bwrap"),
]


@dataclass(frozen=True)
class Toolchain:
    """An exec root holding the client-side layout: .goma_ext_toolchain/HASH/{bin,lib}, src/, out/Default/."""

    exec_root: Path
    prefix: str  # relative to the exec root: .goma_ext_toolchain/HASH

    def program(self, name: str) -> str:
        return f"../../{self.prefix}/bin/{name}"

    @property
    def lib(self) -> str:
        return f"../../{self.prefix}/lib"

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.exec_root)) for p in self.exec_root.rglob("*") if p.is_file())


def _ldd(program: Path) -> dict[str, Path]:
    """soname -> resolved file, for every library `ldd` lists with a path."""
    out = subprocess.run(["ldd", str(program)], capture_output=True, text=True, check=True).stdout
    return {m[1]: Path(m[2]) for m in re.finditer(r"^\s*(\S+) => (/\S+)", out, re.M)}


def _make_toolchain(exec_root: Path, base: Path) -> Toolchain:
    """clang-19 and ls with every library they need that the base root lacks (what the client will ship)."""
    digest = hashlib.sha256(CLANG.read_bytes()).hexdigest()[:8]
    tc = Toolchain(exec_root, f".goma_ext_toolchain/{digest}")
    bin_dir, lib_dir = exec_root / tc.prefix / "bin", exec_root / tc.prefix / "lib"
    bin_dir.mkdir(parents=True)
    lib_dir.mkdir()
    in_base = {p.name for p in (base / "usr" / "lib" / "x86_64-linux-gnu").iterdir()}
    for program in (CLANG, LS):
        shutil.copy(program.resolve(), bin_dir / program.name)
        for soname, path in _ldd(program).items():
            if soname not in in_base and not (lib_dir / soname).exists():
                shutil.copy(path, lib_dir / soname)  # resolves symlinks: the file the loader would map
    (exec_root / "src").mkdir()
    (exec_root / "src" / "hello.c").write_bytes(HELLO_C)
    (exec_root / WORKDIR).mkdir(parents=True)
    return tc


@dataclass(frozen=True)
class BaseCluster:
    state: Path
    base: Path
    toolchain: Toolchain

    def executor(self, salt: str) -> RemoteExecutor:
        st = manager.load(self.state)
        assert st is not None and st.plaintext_endpoint is not None
        return RemoteExecutor(RemoteConfig(endpoint=st.plaintext_endpoint, instance=INSTANCE, cache_salt=salt,
                                           max_attempts=2, token_file=st.token_file(tokens.Role.CLIENT)))


@pytest.fixture(scope="module")
def base_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BaseCluster]:
    """One worker with --base-root (built here) and --platform container-image=IMAGE, running actions as a
    temporary user; everything (cluster, user, directories) is removed afterwards, also on failure."""
    with ExitStack() as stack:
        reach = Path(tempfile.mkdtemp(prefix="gx-base-root-"))  # the runner must reach the base root and sandboxes
        stack.callback(shutil.rmtree, reach, True)
        os.chmod(reach, 0o711)
        base = reach / "root"
        baseroot.build(base, baseroot.DEFAULT_PACKAGES)
        toolchain = _make_toolchain(tmp_path_factory.mktemp("hermetic") / "ws", base)
        runner = stack.enter_context(temporary_user("gxbase"))
        state = tmp_path_factory.mktemp("base-cluster") / "state"
        venv = Path(os.environ.get("GOMA_EXT_SERVER_VENV", REPO / ".state" / "server-venv"))
        spec = manager.ClusterSpec(
            state=state, workers=1, server_venv=venv, instance=INSTANCE, run_as=runner.name,
            sandbox_dir=reach / "sandboxes", keepalive_s=20, poll_s=TEST_POLL_S,
            worker_args=("--base-root", str(base), "--platform", f"container-image={IMAGE}", "--cpu-time", "120"),
        )
        stack.callback(manager.destroy, state)
        manager.start(spec)
        yield BaseCluster(state, base, toolchain)


def _execute(ex: RemoteExecutor, tc: Toolchain, argv: Sequence[str], outputs: Sequence[str],
             platform: dict[str, str]) -> re_pb2.ActionResult:
    """Build the action as the hermetic contract says (relative argv[0], relative LD_LIBRARY_PATH), upload it
    with its input root and execute it."""
    tree = merkle.build_input_tree(tc.exec_root, tc.files(), extra_dirs=[WORKDIR])
    props = re_pb2.Platform(properties=[re_pb2.Platform.Property(name=k, value=v) for k, v in sorted(platform.items())])
    command = re_pb2.Command(arguments=list(argv), working_directory=WORKDIR, output_paths=sorted(outputs),
                             platform=props)
    command.environment_variables.add(name="LD_LIBRARY_PATH", value=tc.lib)
    action = re_pb2.Action(command_digest=Digest.of_message(command).to_proto(),
                           input_root_digest=tree.root.to_proto(), platform=props, salt=ex.cfg.cache_salt.encode())
    action.timeout.seconds = 120
    blobs = {**tree.blobs, Digest.of_message(command): BlobSource(data=serialize(command)),
             Digest.of_message(action): BlobSource(data=serialize(action))}
    ex.cas.upload(blobs)
    response = execution.execute(ex.channel, ex.cfg.instance, ex.metadata, Digest.of_message(action), ex.policy, 300)
    return response.result


def _text(ex: RemoteExecutor, d: re_pb2.Digest) -> str:
    return ex.cas.read(Digest.from_proto(d)).decode(errors="replace")


@pytest.fixture
def executor(base_cluster: BaseCluster, salt: str) -> Iterator[RemoteExecutor]:
    ex = base_cluster.executor(salt)
    yield ex
    ex.close()


def _compile_argv(tc: Toolchain) -> list[str]:
    return [tc.program("clang"), "-x", "c", "-O2", "-c", "../../src/hello.c", "-o", "hello.o"]


def test_a_shipped_clang_compiles_on_the_base_root_byte_identically(
    base_cluster: BaseCluster, executor: RemoteExecutor
) -> None:
    tc = base_cluster.toolchain
    platform = {"container-image": IMAGE, "OSFamily": "linux", "Pool": "default"}  # Pool: a BuildGrid wildcard
    result = _execute(executor, tc, _compile_argv(tc), ["hello.o"], platform)
    assert result.exit_code == 0, _text(executor, result.stderr_digest)
    [out] = result.output_files
    remote = executor.cas.read(Digest.from_proto(out.digest))
    local = subprocess.run([*_compile_argv(tc)[:-1], "local.o"], cwd=tc.exec_root / WORKDIR, check=True,
                           env={"LD_LIBRARY_PATH": tc.lib, "PATH": "/usr/bin:/bin"})
    assert local.returncode == 0
    assert remote == (tc.exec_root / WORKDIR / "local.o").read_bytes() and remote[:4] == b"\x7fELF"


def test_the_base_root_sandbox_holds_no_llvm(base_cluster: BaseCluster, executor: RemoteExecutor) -> None:
    """`ls` from the input root (with its own libraries) lists what the action sees of /: no LLVM, no clang,
    only the base root's files."""
    tc = base_cluster.toolchain
    argv = [tc.program("ls"), "-R", "/usr/lib/llvm-19", "/usr", "/etc"]
    result = _execute(executor, tc, argv, [], {"container-image": IMAGE})
    stdout, stderr = _text(executor, result.stdout_digest), _text(executor, result.stderr_digest)
    assert result.exit_code == 2 and "cannot access '/usr/lib/llvm-19': No such file or directory" in stderr
    assert "libc.so.6" in stdout and "libstdc++.so.6" in stdout and "ld.so.cache" in stdout  # it did list
    assert "llvm" not in stdout.lower() and "clang" not in stdout.lower()


def test_an_action_for_another_image_is_failed_precondition(
    base_cluster: BaseCluster, executor: RemoteExecutor
) -> None:
    tc = base_cluster.toolchain
    with pytest.raises(RemoteError) as e:
        _execute(executor, tc, _compile_argv(tc), ["hello.o"], {"container-image": "debian:12"})
    assert e.value.code == "FAILED_PRECONDITION", e.value
    assert f"goma-ext worker refused the action: it asks for container-image=debian:12; this worker runs {IMAGE}" \
        in str(e.value)


def test_a_bare_compiler_name_is_refused_on_the_base_root(base_cluster: BaseCluster, executor: RemoteExecutor) -> None:
    with pytest.raises(RemoteError) as e:
        _execute(executor, base_cluster.toolchain, ["clang-19", "--version"], [], {"container-image": IMAGE})
    assert e.value.code == "PERMISSION_DENIED" and "not an allow-listed compiler (allowed: none)" in str(e.value)


def test_the_session_cluster_runs_shipped_programs_too(
    cluster: Cluster, base_cluster: BaseCluster, salt: str
) -> None:
    """The host-layout workers run an input program as well (sandboxed, host /usr visible: LLVM is there), and
    refuse a container-image, since they advertise none."""
    ex = RemoteExecutor(RemoteConfig(endpoint=cluster.endpoint, instance=INSTANCE, cache_salt=salt, max_attempts=2,
                                     token_file=cluster.token_file))
    try:
        tc = base_cluster.toolchain
        result = _execute(ex, tc, _compile_argv(tc), ["hello.o"], {"OSFamily": "linux"})
        assert result.exit_code == 0, _text(ex, result.stderr_digest)
        result = _execute(ex, tc, [tc.program("ls"), "/usr/lib/llvm-19"], [], {})
        assert result.exit_code == 0 and "bin" in _text(ex, result.stdout_digest)
        with pytest.raises(RemoteError) as e:
            _execute(ex, tc, [tc.program("ls")], [], {"container-image": IMAGE})
        assert e.value.code == "FAILED_PRECONDITION" and "this worker runs no container image" in str(e.value)
    finally:
        ex.close()


def test_buildgrid_refuses_a_platform_key_it_does_not_know(base_cluster: BaseCluster, executor: RemoteExecutor) -> None:
    """BuildGrid 0.4.4 refuses at Execute a key that is neither a match nor a wildcard key (hence the cluster's
    wildcard keys container-image and Pool)."""
    tc = base_cluster.toolchain
    with pytest.raises(RemoteError) as e:
        _execute(executor, tc, _compile_argv(tc), ["hello.o"], {"container-image": IMAGE, "dockerNetwork": "off"})
    assert "FAILED_PRECONDITION" in f"{e.value.code} {e.value}" and "Unregistered platform property" in str(e.value)
