"""Run one command remotely: build the input root, consult the action cache, upload, execute, fetch outputs."""

from __future__ import annotations

import os
import posixpath
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from goma_ext.reapi import action as action_mod
from goma_ext.reapi import capabilities, execution, retry
from goma_ext.reapi.cas import Cas
from goma_ext.reapi.channel import open_channel
from goma_ext.reapi.digest import Digest
from goma_ext.reapi.errors import InputError, RemoteError
from goma_ext.reapi.merkle import BlobSource, FileDigester, InputTree, build_input_tree, hash_file
from goma_ext.reapi.proto import re_pb2
from goma_ext.remote.config import RemoteConfig
from goma_ext.remote.identity import CompilerIdentity
from goma_ext.remote.toolchain import Toolchain, ToolchainCache
from thinlto_base import remote_stub, safefs


@dataclass(frozen=True)
class RemoteRun:
    """What came back: exit code, output streams, whether the action cache answered, and transfer figures."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    cache_hit: bool
    bytes_uploaded: int
    input_bytes: int
    action_digest: str
    phases: dict[str, float] = field(default_factory=dict)


def exec_relative(exec_root: Path, cwd: Path) -> str:
    """cwd as a path relative to the exec root ('.' for the root itself); refuses a cwd outside it."""
    rel = os.path.relpath(cwd.resolve(), exec_root.resolve())
    if rel == ".." or rel.startswith("../"):
        raise InputError(f"working directory {cwd} is outside the exec root {exec_root}")
    return Path(rel).as_posix()


def _under(work_rel: str, path: str) -> str:
    """path (relative to the working directory work_rel) as a path below the exec root; refuses any other."""
    if posixpath.isabs(path):
        raise InputError(f"path {path!r} is absolute; remote actions take paths relative to the build directory")
    rel = posixpath.normpath(posixpath.join(work_rel, path))
    if rel in (".", "..") or rel.startswith("../"):
        raise InputError(f"path {path!r} leaves the exec root; remote actions read and write only below it")
    return rel


def check_arguments(argv: Sequence[str]) -> None:
    """Refuse arguments that carry absolute paths: they would make the action machine-specific."""
    for arg in argv[1:]:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if value.startswith("/"):
            raise InputError(f"argument {arg!r} holds an absolute path; remote actions need relative paths")


def _write_atomically(path: Path, data: bytes, executable: bool) -> None:
    """Replace path with data via a temp file (the data verified by the caller)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o755 if executable else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass(frozen=True)
class PreparedAction:
    """An action ready to look up or execute: its messages, its input tree and where its outputs go."""

    built: action_mod.BuiltAction
    tree: InputTree
    outputs: tuple[str, ...]
    # Where each output goes on disk: the exec root joined with the output's confined path (what _under gave).
    destinations: tuple[Path, ...]

    def blobs(self) -> dict[Digest, BlobSource]:
        """Everything the CAS must hold to execute the action."""
        blobs = dict(self.tree.blobs)
        blobs[self.built.command_digest] = BlobSource(data=self.built.command)
        blobs[self.built.action_digest] = BlobSource(data=self.built.action)
        return blobs


def toolchain_for(cfg: RemoteConfig, argv0: str, compiler: CompilerIdentity, cache: ToolchainCache) -> Toolchain | None:
    """The toolchain tree the action carries (`toolchain: inputs`), or None (`host`: the worker maps argv[0])."""
    if cfg.toolchain == "host":
        return None
    return cache.get(compiler.path, Path(argv0).name, cfg.base_system)


def _platform(
    cfg: RemoteConfig, compiler: CompilerIdentity, toolchain: Toolchain | None
) -> tuple[tuple[str, str], ...]:
    """The configured properties; a host-toolchain action also names the compiler the worker must have."""
    props = dict(cfg.platform)
    if toolchain is None:
        props = dict(compiler.properties()) | props
    return tuple(sorted(props.items()))


def prepare_action(
    cfg: RemoteConfig,
    argv: Sequence[str],
    cwd: Path,
    inputs: Sequence[str],
    outputs: Sequence[str],
    compiler: CompilerIdentity,
    digest_of: FileDigester = hash_file,
    toolchain: Toolchain | None = None,
) -> PreparedAction:
    """Check the command's paths, hash its inputs into a tree and build its Action (exec root from cfg). With a
    toolchain, the compiler and its libraries join the input root and the command runs them from there."""
    check_arguments(argv)
    exec_root = exec_root_of(cfg, cwd)
    work = exec_relative(exec_root, cwd)
    subtrees = {toolchain.dirname: toolchain.tree} if toolchain is not None else {}
    tree = build_input_tree(exec_root, [_under(work, p) for p in inputs], extra_dirs=[work], digest_of=digest_of,
                            subtrees=subtrees)
    return action_for_tree(cfg, argv, exec_root, work, outputs, tree, toolchain, _platform(cfg, compiler, toolchain))


def exec_root_of(cfg: RemoteConfig, cwd: Path) -> Path:
    """The input root's directory: cfg.exec_root, relative to the working directory CWD unless absolute."""
    return (cwd / cfg.exec_root) if not cfg.exec_root.is_absolute() else cfg.exec_root


def action_for_tree(cfg: RemoteConfig, argv: Sequence[str], exec_root: Path, work: str, outputs: Sequence[str],
                    tree: InputTree, toolchain: Toolchain | None, platform: tuple[tuple[str, str], ...]
                    ) -> PreparedAction:
    """The Action running ARGV in WORK (exec-root-relative) on TREE, whose OUTPUTS go below EXEC_ROOT. With a
    toolchain (already grafted into TREE), argv[0] is its program and LD_LIBRARY_PATH its lib/ directory."""
    root = exec_root.resolve()  # once, not once per output
    destinations = tuple(root / _under(work, out) for out in outputs)
    program = toolchain.argv0(work) if toolchain is not None else Path(argv[0]).name
    env = (("LD_LIBRARY_PATH", toolchain.library_path(work)),) if toolchain is not None else ()
    spec = action_mod.ActionSpec(
        arguments=(program, *argv[1:]),
        working_directory=work,
        output_paths=tuple(outputs),
        platform=platform,
        input_root=tree.root,
        timeout_s=int(cfg.execute_timeout_s),
        salt=cfg.cache_salt.encode(),
        environment=env,
    )
    return PreparedAction(action_mod.build(spec), tree, tuple(outputs), destinations)


def kept_in_cas(cfg: RemoteConfig) -> tuple[str, str] | None:
    """(endpoint, instance) a stand-in records when CFG keeps native objects in the CAS (`download: minimal`)."""
    return (cfg.endpoint, cfg.instance) if cfg.download == "minimal" else None


class Fetched(NamedTuple):
    """What fetch_outputs brought: the streams, and the outputs it left as they were because their destination
    already held their bytes (count and bytes, not downloaded)."""

    stdout: bytes
    stderr: bytes
    kept_outputs: int = 0
    kept_bytes: int = 0


def fetch_outputs(cas: Cas, result: re_pb2.ActionResult, prepared: PreparedAction,
                  kept: tuple[str, str] | None = None) -> Fetched:
    """Download streams and output files (all verified) and only then replace the outputs on disk, each at its
    confined destination below the exec root. An output whose destination already holds its bytes (a regular
    file of that digest) is not downloaded, only given a new modification time, as the compiler or linker would
    have given it by writing it: a ninja rule without restat (a link) would otherwise run again at every build.
    An incremental build's backends that rerun to the same object bring nothing down (the backend step copies
    the staged object to the edge's output only when it changed, so restat still stops there). With KEPT
    (`download: minimal`: endpoint and instance), native objects are not downloaded: a stand-in naming the
    digest takes their place (thinlto_base.remote_stub)."""
    outputs = prepared.outputs
    files = {f.path: f for f in result.output_files}
    wanted: dict[str, Digest] = {}
    stubs: dict[str, remote_stub.Stub] = {}
    here: set[str] = set()
    if result.exit_code == 0:
        for out, dest in zip(outputs, prepared.destinations, strict=True):
            if out not in files:
                raise RemoteError(f"remote result lacks output {out}", temporary=True, code="MISSING_OUTPUT")
            digest = Digest.from_proto(files[out].digest)
            if kept is not None and remote_stub.kept_remote(out):
                stubs[out] = remote_stub.Stub(digest.hash, digest.size, files[out].is_executable, *kept)
            elif safefs.holds(dest, digest.hash, digest.size, files[out].is_executable):
                here.add(out)
            else:
                wanted[out] = digest
    stream_digests = [
        Digest.from_proto(d)
        for raw, d in ((result.stdout_raw, result.stdout_digest), (result.stderr_raw, result.stderr_digest))
        if not raw and d.hash
    ]
    if stubs and (lost := cas.find_missing(Digest(s.hash, s.size) for s in stubs.values())):
        # an action-cache entry whose objects the CAS evicted: a stand-in for them would name nothing
        raise RemoteError(f"the CAS no longer holds {len(lost)} output(s) of this action, e.g. {min(lost)}",
                          temporary=True, code="MISSING_OUTPUT")
    blobs = cas.read_many([*wanted.values(), *stream_digests])
    stdout = result.stdout_raw or (blobs[Digest.from_proto(result.stdout_digest)] if result.stdout_digest.hash else b"")
    stderr = result.stderr_raw or (blobs[Digest.from_proto(result.stderr_digest)] if result.stderr_digest.hash else b"")
    if result.exit_code == 0:
        for out, dest in zip(outputs, prepared.destinations, strict=True):
            stub = stubs.get(out)
            if out in wanted:
                _write_atomically(dest, blobs[wanted[out]], files[out].is_executable)
            elif stub is not None and not remote_stub.holds(dest, stub):
                _write_atomically(dest, stub.text(), False)
            else:  # its bytes (or the object's) already here: a new mtime, never through a link planted since
                try:
                    os.utime(dest, follow_symlinks=False)
                except OSError:  # gone since, or not ours to touch: the bytes were right (a rerun at worst)
                    pass
    return Fetched(stdout, stderr, len(here), sum(files[out].digest.size_bytes for out in here))


class RemoteExecutor:
    """A REAPI client bound to one config; one per process (the CAS upload memory lives here)."""

    def __init__(self, cfg: RemoteConfig, toolchains: ToolchainCache | None = None) -> None:
        self.cfg = cfg
        self.toolchains = toolchains or ToolchainCache()
        self.metadata = cfg.metadata()
        self.policy = retry.RetryPolicy(cfg.max_attempts, cfg.backoff_base_s, cfg.backoff_cap_s, cfg.rpc_timeout_s)
        self.channel = open_channel(cfg)
        limits = capabilities.fetch(self.channel, cfg.instance, self.metadata, self.policy)
        if not limits.exec_enabled:
            raise RemoteError(f"{cfg.endpoint} does not offer remote execution", temporary=False)
        self.cas = Cas(self.channel, cfg.instance, self.metadata, limits, self.policy)

    def close(self) -> None:
        self.channel.close()

    def lookup(self, action: Digest) -> re_pb2.ActionResult | None:
        return execution.lookup(self.channel, self.cfg.instance, self.metadata, action, self.policy)

    def execute(self, action: Digest, cfg: RemoteConfig | None = None) -> re_pb2.ActionResult:
        """Execute a cached-checked action whose blobs are in the CAS (timeouts from cfg, default ours)."""
        cfg = cfg or self.cfg
        response = execution.execute(
            self.channel, cfg.instance, self.metadata, action, self.policy, cfg.execute_timeout_s, cfg.queue_timeout_s
        )
        return response.result

    def run(
        self, argv: Sequence[str], cwd: Path, inputs: Sequence[str], outputs: Sequence[str], compiler: CompilerIdentity,
        keep_natives: bool = False,
    ) -> RemoteRun:
        """Run argv (inputs/outputs relative to cwd) remotely and write its outputs under cwd. KEEP_NATIVES (the
        backend wrapper under `download: minimal`, whose final links run remotely): stand-ins for native objects."""
        phases: dict[str, float] = {}
        t = time.monotonic()
        toolchain = toolchain_for(self.cfg, argv[0], compiler, self.toolchains)
        prepared = prepare_action(self.cfg, argv, cwd, inputs, outputs, compiler, toolchain=toolchain)
        phases["prepare"] = time.monotonic() - t
        t = time.monotonic()
        result = self.lookup(prepared.built.action_digest)
        phases["cache_lookup"] = time.monotonic() - t
        cache_hit = result is not None
        uploaded = 0
        if result is None:
            t = time.monotonic()
            uploaded = self.cas.upload(prepared.blobs())
            phases["upload"] = time.monotonic() - t
            t = time.monotonic()
            result = self.execute(prepared.built.action_digest)
            phases["execute"] = time.monotonic() - t
        t = time.monotonic()
        kept = kept_in_cas(self.cfg) if keep_natives else None
        fetched = fetch_outputs(self.cas, result, prepared, kept)
        phases["download"] = time.monotonic() - t
        return RemoteRun(
            exit_code=result.exit_code,
            stdout=fetched.stdout,
            stderr=fetched.stderr,
            cache_hit=cache_hit,
            bytes_uploaded=uploaded,
            input_bytes=prepared.tree.file_bytes,
            action_digest=str(prepared.built.action_digest),
            phases=phases,
        )
