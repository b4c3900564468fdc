"""Hermetic actions on the worker: programs shipped in the input root (resolved inside it, only sandboxed, one
retry on ETXTBSY), the base root as the sandbox's /, and the platform properties a worker offers and checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from goma_ext.reapi.digest import Digest, serialize
from goma_ext.reapi.proto import code_pb2, re_pb2
from goma_ext.worker import baseroot, sandbox
from goma_ext.worker.errors import Refusal
from goma_ext.worker.lease import LeaseOutcome, execute_lease, hand_over, probe, probe_command
from goma_ext.worker.policy import NO_OFFER, Allowlist, Offer, PlatformError, requested
from goma_ext.worker.sandbox import ExecFailed, Isolation, IsolationMode, Limits, bwrap_argv, run
from tests.unit.test_worker_runner import _DictCas, _sandboxed

DASH = Path("/usr/bin/dash").read_bytes()
NO_LOADER = DASH.replace(b"/lib64/ld-linux-x86-64.so.2", b"/lib64/ld-linux-x86-64.so.9")  # its ELF loader is absent
IMAGE = "docker://example/distroless-cc@sha256:" + "ab" * 32
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap (Debian bubblewrap)")


# --- the bwrap command line with a base root -----------------------------------------------------------------

def test_a_base_root_is_the_sandbox_root_and_no_host_path_is_bound(tmp_path: Path) -> None:
    iso = Isolation(IsolationMode.BWRAP, Limits(), None, base_root=Path("/srv/base"))
    argv = bwrap_argv(iso, ["../../tc/bin/clang", "-c", "a.c"], None, tmp_path, "out/x", {"LD_LIBRARY_PATH": "l"}, 7)
    binds = [(a, argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a in ("--bind", "--ro-bind", "--symlink")]
    assert binds == [("--ro-bind", "/srv/base", "/"), ("--bind", str(tmp_path), sandbox.INPUT_ROOT)]  # no host path
    assert argv.index("--ro-bind") < argv.index("--proc") < argv.index("--dev") < argv.index("--tmpfs")
    assert argv[argv.index("--tmpfs") - 2:argv.index("--tmpfs") + 2] == ["--size", str(1 << 30), "--tmpfs", "/tmp"]
    assert argv[argv.index("--chdir") + 1] == "/b/out/x"
    assert argv[argv.index("LD_LIBRARY_PATH") + 1] == "l" and sandbox.TOOL_DIR not in " ".join(argv)
    assert argv[argv.index("--json-status-fd") - 2:] == [
        "--remount-ro", "/", "--json-status-fd", "7", "--", "../../tc/bin/clang", "-c", "a.c"]


def test_an_input_program_on_the_host_layout_gets_no_tool_link(tmp_path: Path) -> None:
    argv = bwrap_argv(_sandboxed(), ["./cc"], None, tmp_path, ".", {}, 3)
    assert not any(a.startswith(sandbox.TOOL_DIR) for a in argv) and argv[argv.index("--ro-bind") + 1] == "/usr"
    assert argv[argv.index("PATH") + 1] == "/usr/bin:/bin"


# --- platform properties ----------------------------------------------------------------------------------------

def test_platform_properties_parse() -> None:
    offer = Offer.parse([f"container-image={IMAGE}", "Pool=fast", "OSFamily=linux", "Pool=fast"])
    assert offer.properties == (("OSFamily", "linux"), ("Pool", "fast"), ("container-image", IMAGE))
    assert ("container-image", IMAGE) in Allowlist({}).properties(offer)


@pytest.mark.parametrize("item, why", [
    ("container-image", "expected KEY=VALUE"), ("=x", "expected KEY=VALUE"),
    ("compiler-sha256=00", "advertises its compilers' identities itself"), ("OSFamily=windows", "runs OSFamily=linux"),
])
def test_bad_platform_properties_are_refused(item: str, why: str) -> None:
    with pytest.raises(PlatformError, match=why):
        Offer.parse([item])
    with pytest.raises(PlatformError, match="given twice"):
        Offer.parse(["Pool=a", "Pool=b"])


def _check(offer: Offer, **wanted: str) -> str:
    with pytest.raises(Refusal) as e:
        offer.check({k.replace("_", "-"): [v] for k, v in wanted.items()})
    assert e.value.code == code_pb2.FAILED_PRECONDITION
    return str(e.value)


def test_an_action_for_another_image_or_pool_is_refused() -> None:
    offer = Offer.parse([f"container-image={IMAGE}", "Pool=fast"])
    assert _check(offer, container_image="other:1") == f"it asks for container-image=other:1; this worker runs {IMAGE}"
    assert _check(Offer(), container_image="x") == "it asks for container-image=x; this worker runs no container image"
    assert _check(offer, Pool="slow") == "it asks for Pool=slow; this worker offers Pool=fast"
    assert _check(offer, OSFamily="windows") == "it asks for OSFamily=windows; this worker offers OSFamily=linux"
    offer.check({"container-image": [IMAGE], "Pool": ["fast"], "OSFamily": ["linux"], "compiler-sha256": ["00"]})
    Offer().check({"Pool": ["any"], "dockerNetwork": ["off"]})  # keys the worker does not advertise: no requirement


# --- input programs through execute_lease (real bubblewrap) -----------------------------------------------------

def _tree(cas: _DictCas, files: dict[str, tuple[bytes, bool]], links: dict[str, str]) -> Digest:
    """An input root from {path: (content, executable)} and {path: symlink target}; uploaded into `cas`."""
    entries: dict[str, dict[str, object]] = {"": {}}
    for path in [*files, *links]:
        parts = path.split("/")
        for i in range(len(parts)):
            entries.setdefault("/".join(parts[:i]), {})
    def build(prefix: str) -> Digest:
        d = re_pb2.Directory()
        names = sorted({p[len(prefix):].lstrip("/").split("/")[0] for p in [*files, *links, *entries]
                        if p.startswith(prefix) and p != prefix and (not prefix or p[len(prefix)] == "/")})
        for name in names:
            full = f"{prefix}/{name}" if prefix else name
            if full in files:
                data, x = files[full]
                cas.blobs[Digest.of_bytes(data)] = data
                d.files.add(name=name, digest=Digest.of_bytes(data).to_proto(), is_executable=x)
            elif full in links:
                d.symlinks.add(name=name, target=links[full])
            else:
                d.directories.add(name=name, digest=build(full).to_proto())
        cas.blobs[Digest.of_message(d)] = serialize(d)
        return Digest.of_message(d)
    return build("")


def _lease(argv: list[str], files: dict[str, tuple[bytes, bool]], links: dict[str, str] | None = None,
           workdir: str = "out/x", platform: dict[str, str] | None = None) -> tuple[_DictCas, Digest]:
    cas = _DictCas({})
    root = _tree(cas, files, links or {})
    props = [re_pb2.Platform.Property(name=k, value=v) for k, v in sorted((platform or {}).items())]
    command = re_pb2.Command(arguments=argv, working_directory=workdir, output_paths=["o.txt"],
                             platform=re_pb2.Platform(properties=props))
    command.environment_variables.add(name="LD_LIBRARY_PATH", value="../../tc/lib")
    action = re_pb2.Action(command_digest=Digest.of_message(command).to_proto(), input_root_digest=root.to_proto(),
                           platform=re_pb2.Platform(properties=props))
    cas.blobs[Digest.of_message(command)] = serialize(command)
    cas.blobs[Digest.of_message(action)] = serialize(action)
    return cas, Digest.of_message(action)


def _execute(box: Path, argv: list[str], files: dict[str, tuple[bytes, bool]], links: dict[str, str] | None = None,
             iso: Isolation | None = None, offer: Offer = NO_OFFER, **kw: dict[str, str]) -> LeaseOutcome:
    cas, digest = _lease(argv, files, links, **kw)  # type: ignore[arg-type]
    out = execute_lease(cas, digest, Allowlist({}), box.parent, iso or _sandboxed(), offer=offer)  # type: ignore[arg-type]
    assert [p.name for p in box.parent.iterdir()] == [box.name]  # the lease's box is gone, whatever happened
    return out


def _refused(outcome: LeaseOutcome, code: int, text: str) -> None:
    assert outcome.result is None and outcome.status.code == code, outcome.status
    assert outcome.status.message.startswith("goma-ext worker") and text in outcome.status.message, outcome.status


SH = {"tc/bin/sh": (DASH, True)}


@needs_bwrap
def test_an_input_program_runs_from_the_working_directory(box: Path) -> None:
    cas, digest = _lease(["../../tc/bin/sh", "-c", 'echo "$LD_LIBRARY_PATH" > o.txt; pwd'], SH)
    out = execute_lease(cas, digest, Allowlist({}), box.parent, _sandboxed())  # type: ignore[arg-type]
    assert out.result is not None and out.result.exit_code == 0, out.status
    assert cas.read(Digest.from_proto(out.result.stdout_digest)) == b"/b/out/x\n"
    assert cas.read(Digest.from_proto(out.result.output_files[0].digest)) == b"../../tc/lib\n"


@needs_bwrap
@pytest.mark.parametrize("argv0, files, links, code, text", [
    ("/usr/bin/dash", SH, {}, code_pb2.INVALID_ARGUMENT, "is absolute"),
    ("../../../tc/bin/sh", SH, {}, code_pb2.INVALID_ARGUMENT, "escapes the sandbox"),
    ("../../tc/bin/cc", SH, {}, code_pb2.INVALID_ARGUMENT, "is not in the input root"),
    ("../../tc/bin", SH, {}, code_pb2.INVALID_ARGUMENT, "is not a regular file"),
    ("../../tc/bin/sh", {"tc/bin/sh": (DASH, False)}, {}, code_pb2.INVALID_ARGUMENT, "is not executable"),
    ("../../tc/bin/cc", SH, {"tc/bin/cc": "../../tc/bin/loop", "tc/bin/loop": "cc"}, code_pb2.INVALID_ARGUMENT,
     "more than 40 symlinks"),
    # each link stays inside textually, but tc/up is the root itself, so tc/up/.. leaves it
    ("../../tc/bin/cc", SH, {"tc/up": "..", "tc/bin/cc": "../up/../usr/bin/dash"}, code_pb2.INVALID_ARGUMENT,
     "leaves the input root as the kernel resolves it"),
    ("../../tc/bin/sh", {"tc/bin/sh": (NO_LOADER, True)}, {}, code_pb2.INVALID_ARGUMENT,
     "cannot execute the program in the sandbox: execvp ../../tc/bin/sh: No such file or directory"),
])
def test_bad_input_programs_are_refused(box: Path, argv0: str, files: dict[str, tuple[bytes, bool]],
                                        links: dict[str, str], code: int, text: str) -> None:
    _refused(_execute(box, [argv0, "-c", "true"], files, links), code, text)


def test_an_unsandboxed_worker_refuses_uploaded_programs(box: Path) -> None:
    iso = Isolation(IsolationMode.NONE, Limits(), _sandboxed().run_as)
    _refused(_execute(box, ["../../tc/bin/sh", "-c", "true"], SH, iso=iso), code_pb2.FAILED_PRECONDITION,
             "would run an uploaded program unsandboxed")


def test_an_action_for_another_image_is_refused_before_anything_runs(box: Path) -> None:
    offer = Offer.parse([f"container-image={IMAGE}"])
    out = _execute(box, ["../../tc/bin/sh"], SH, offer=offer, platform={"container-image": "other:1"})
    _refused(out, code_pb2.FAILED_PRECONDITION,
             f"goma-ext worker refused the action: it asks for container-image=other:1; this worker runs {IMAGE}")


def test_requested_merges_action_and_command_platforms() -> None:
    a = re_pb2.Action(platform=re_pb2.Platform(properties=[re_pb2.Platform.Property(name="Pool", value="a")]))
    c = re_pb2.Command(platform=re_pb2.Platform(properties=[re_pb2.Platform.Property(name="Pool", value="b"),
                                                            re_pb2.Platform.Property(name="Pool", value="a")]))
    assert requested(a, c) == {"Pool": ["a", "b"]}


# --- ETXTBSY ------------------------------------------------------------------------------------------------------

@needs_bwrap
@pytest.mark.parametrize("released", [True, False], ids=["released-in-time", "held"])
def test_a_program_busy_for_writing_is_retried_once(box: Path, released: bool) -> None:
    """A writable descriptor of the program (what a concurrent fork inherits) makes exec fail with ETXTBSY:
    the runner waits and retries once; a descriptor that stays open is reported as an exec failure."""
    iso = _sandboxed()
    prog = box / "root" / "sh"
    prog.write_bytes(DASH)
    prog.chmod(0o755)
    hand_over(box / "root", iso)
    fd = os.open(prog, os.O_WRONLY)
    closer = threading.Timer(0.1, os.close, (fd,)) if released else None
    try:
        if closer is not None:
            closer.start()
            done = run(iso, ["./sh", "-c", "echo ran"], None, box / "root", ".", {}, 30, box)
            assert done.exit_code == 0 and done.stdout == b"ran\n"
        else:
            with pytest.raises(ExecFailed, match="Text file busy") as e:
                run(iso, ["./sh", "-c", "echo ran"], None, box / "root", ".", {}, 30, box)
            assert e.value.text_busy
    finally:
        if closer is not None:
            closer.join()
        else:
            os.close(fd)


# --- the command line and the base-root builder ------------------------------------------------------------------

def _worker(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # as root, a runner user that exists (the default goma-ext-runner is made by `cluster start`, which a fresh
    # machine may not have run yet), so that the option under test is the one refused
    run_as = ["--run-as", "nobody"] if os.geteuid() == 0 else []
    argv = [sys.executable, "-m", "goma_ext.cli", "worker", "--remote", "grpc://127.0.0.1:1", "--work-dir",
            str(tmp_path / "w"), *run_as, *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)


def test_the_worker_refuses_a_token_file_others_may_read_before_it_starts(tmp_path: Path) -> None:
    """One line and an exit, before any worker process: a bot would retry its session for ever."""
    token = tmp_path / "worker.token"
    token.write_text("t\n")
    token.chmod(0o644)
    proc = _worker(tmp_path, "--compiler", "clang-19", env={**os.environ, "GOMA_EXT_REMOTE_TOKEN_FILE": str(token)})
    assert proc.returncode == 2 and proc.stderr == (f"goma-ext: error: remote token_file {token}: mode 644 lets other "
                                                    f"users read or change a secret; chmod 600 {token}\n"), proc.stderr


@pytest.mark.parametrize("extra, why", [
    (("--base-root", "/", "--compiler", "clang-19"), "--compiler and --base-root exclude each other"),
    (("--base-root", "/nonexistent-gx"), "lacks proc, dev, tmp, b"),
    (("--platform", "Pool"), "--platform 'Pool': expected KEY=VALUE"),
])
def test_the_worker_refuses_bad_hermetic_options_in_one_line(tmp_path: Path, extra: tuple[str, ...], why: str) -> None:
    proc = _worker(tmp_path, *extra)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and why in proc.stderr, proc.stderr


def test_base_root_paths_follow_merged_usr() -> None:
    assert baseroot.destination("/lib64/ld-linux-x86-64.so.2") == "usr/lib64/ld-linux-x86-64.so.2"
    assert baseroot.destination("/lib/x86_64-linux-gnu/libc.so.6") == "usr/lib/x86_64-linux-gnu/libc.so.6"
    assert baseroot.destination("/usr/share/doc/libc6") == "usr/share/doc/libc6"
    assert baseroot.destination("/lib") == "lib"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("dpkg") is None, reason="ldconfig -r chroots: needs root")
def test_a_base_root_never_holds_a_toolchain(tmp_path: Path) -> None:
    llvm = next((p for p in ("libllvm19", "libllvm22") if subprocess.run(
        ["dpkg", "-s", p], capture_output=True, check=False).returncode == 0), None)
    if llvm is None:
        pytest.skip("no libllvm package installed")
    with pytest.raises(baseroot.BaseRootError, match="would hold a toolchain"):
        baseroot.build(tmp_path / "root", [*baseroot.DEFAULT_PACKAGES, llvm])
    assert list(tmp_path.iterdir()) == []  # nothing left behind


def test_a_worker_can_refuse_every_uploaded_program(box: Path) -> None:
    cas, digest = _lease(["../../tc/bin/sh", "-c", "true"], SH)
    out = execute_lease(cas, digest, Allowlist({}, input_programs=False), box.parent, _sandboxed())  # type: ignore[arg-type]
    _refused(out, code_pb2.PERMISSION_DENIED, "runs only allow-listed compilers (--no-input-programs)")


@needs_bwrap
def test_dotdot_after_a_symlinked_working_directory_is_resolved_as_the_kernel_does(box: Path) -> None:
    """w -> . would put the working directory at the root: `../usr/bin/dash` reads, textually, as the input root's
    usr/bin/dash (present), but exec would run the sandbox's /usr/bin/dash, outside the input root. The worker
    takes no working directory through a symlink at all."""
    files = {"usr/bin/dash": (DASH, True)}
    _refused(_execute(box, ["../usr/bin/dash", "-c", "true"], files, {"w": "."}, workdir="w"),  # type: ignore[arg-type]
             code_pb2.INVALID_ARGUMENT, "'w' is a symlink or not a directory")


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("dpkg") is None, reason="ldconfig -r chroots: needs root")
def test_the_start_up_probe_runs_the_base_roots_loader(box: Path) -> None:
    base = box.parent / "base"
    summary = baseroot.build(base, baseroot.DEFAULT_PACKAGES)
    assert summary.files > 100 and summary.size_bytes < 100e6 and baseroot.forbidden_paths(base) == []
    assert {p.name for p in base.iterdir() if p.is_symlink()} == {"bin", "sbin", "lib", "lib64"}
    iso = Isolation(IsolationMode.BWRAP, Limits(), _sandboxed().run_as, base_root=base)
    assert probe_command(iso) == ["/usr/lib64/ld-linux-x86-64.so.2", "--version"]
    assert probe(iso, box.parent) is None
    shutil.rmtree(base / "usr" / "lib64")
    shutil.rmtree(base / "usr" / "lib")
    with pytest.raises(sandbox.SandboxError, match="has no dynamic loader"):
        probe_command(iso)
