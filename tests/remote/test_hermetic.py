"""The compiler travels as inputs ([hermetic]): remote backends run the clang of their input root, the toolchain
is uploaded once, and a compiler that cannot travel runs locally after one line naming why."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bench.subjects import thin_program
from bench.subjects.thin_program import ThinProgram
from goma_ext.remote import stats
from goma_ext.remote.config import DEFAULT_BASE_SYSTEM
from goma_ext.remote.toolchain import ToolchainCache
from goma_ext.remote.wrapper import WARNING_PREFIX
from tests.remote.conftest import Cluster, records, wrapper

CLANG = Path("/usr/lib/llvm-19/bin/clang")


def test_backends_run_the_compiler_they_carry_and_the_toolchain_is_uploaded_once(
    cluster: Cluster, program: ThinProgram, ref: dict[str, bytes], tmp_path: Path, salt: str
) -> None:
    again = program.copy(tmp_path / "again")
    toolchain = ToolchainCache().get(CLANG, thin_program.CLANG, DEFAULT_BASE_SYSTEM)
    for m in thin_program.MODULES:
        run = wrapper(program, program.backend(m), cluster.endpoint, salt, "--no-proxy")
        assert run.returncode == 0 and WARNING_PREFIX not in run.stderr, run.stderr
        assert program.native(m).read_bytes() == ref[m], m
    assert [r.mode for r in records(program)] == [stats.Mode.REMOTE] * len(thin_program.MODULES)
    assert (program.out / ".goma_ext_toolchains.json").is_file()  # digests kept for the next process
    # Another build directory, another salt: every backend executes again, and none uploads the toolchain.
    for m in thin_program.MODULES:
        run = wrapper(again, again.backend(m), cluster.endpoint, salt + "-again", "--no-proxy")
        assert run.returncode == 0 and WARNING_PREFIX not in run.stderr, run.stderr
    second = stats.report(again.out)
    assert second["remote_executions"] == len(thin_program.MODULES)
    assert 0 < second["bytes_uploaded"] < toolchain.tree.file_bytes // 100, second


def _needs_ld_library_path(tmp_path: Path) -> tuple[Path, Path]:
    """A compiler driver that runs only with LD_LIBRARY_PATH set: it needs libgxshim.so.1, found nowhere else,
    and then execs clang-19 (a wrapper, as distributions and SDKs ship them)."""
    libs = tmp_path / "shim-libs"
    libs.mkdir()
    (tmp_path / "shim.c").write_text("int gx_shim(void) { return 0; }\n")
    (tmp_path / "drv.c").write_text(
        "#include <unistd.h>\nint gx_shim(void);\n"
        "int main(int argc, char **argv) { (void)argc; argv[0] = \"clang-19\";\n"
        "  return gx_shim() + execv(\"/usr/bin/clang-19\", argv); }\n"
    )
    subprocess.run(["clang-19", "-shared", "-fPIC", "-Wl,-soname,libgxshim.so.1", "-o", libs / "libgxshim.so.1",
                    tmp_path / "shim.c"], check=True)
    drv = tmp_path / "bin" / "clang-gx"
    drv.parent.mkdir()
    subprocess.run(["clang-19", "-o", drv, tmp_path / "drv.c", f"-L{libs}", "-l:libgxshim.so.1"], check=True)
    return drv, libs


def test_a_compiler_whose_library_cannot_be_resolved_runs_locally_naming_it(
    cluster: Cluster, program: ThinProgram, ref: dict[str, bytes], tmp_path: Path, salt: str
) -> None:
    """The remote closure cannot find the library; the local compile runs without LD_LIBRARY_PATH (what the cache
    key cannot describe: thinlto_base.compile_env), so it cannot start either, and both say why."""
    drv, libs = _needs_ld_library_path(tmp_path)
    m = thin_program.MODULES[0]
    proc = wrapper(program, program.backend(m, compiler=str(drv)), cluster.endpoint, salt, "--no-proxy",
                   env={"LD_LIBRARY_PATH": str(libs)})
    assert proc.returncode == 127, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if line.startswith(WARNING_PREFIX)]
    assert len(warnings) == 1 and "libgxshim.so.1" in warnings[0] and "runs locally" in warnings[0], proc.stderr
    assert "gn-thinlto: note: backend compiles run without LD_LIBRARY_PATH" in proc.stderr
    assert [r.mode for r in records(program)] == [stats.Mode.FALLBACK]
    with_run_path = tmp_path / "bin" / "clang-gx-rpath"
    subprocess.run(["clang-19", "-o", with_run_path, tmp_path / "drv.c", f"-L{libs}", "-l:libgxshim.so.1",
                    f"-Wl,-rpath,{libs}"], check=True)
    proc = wrapper(program, program.backend(m, compiler=str(with_run_path)), cluster.endpoint, salt, "--no-proxy")
    assert proc.returncode == 0, proc.stderr
    assert program.native(m).read_bytes() == ref[m]


def test_a_platform_the_service_rejects_is_one_line_with_its_message_and_a_local_run(
    cluster: Cluster, program: ThinProgram, ref: dict[str, bytes], salt: str
) -> None:
    """BuildGrid refuses a property key it does not know; our workers refuse an image they do not run."""
    cases = {"Arch=sparc64": "Unregistered platform property",
             "container-image=docker://elsewhere/cc@sha256:00": "asks for container-image"}
    for m, (platform, message) in zip(thin_program.MODULES, cases.items(), strict=False):
        run = wrapper(program, program.backend(m), cluster.endpoint, salt, "--no-proxy",
                      env={"GOMA_EXT_REMOTE_PLATFORM": platform})
        assert run.returncode == 0, run.stderr
        warnings = [line for line in run.stderr.splitlines() if line.startswith(WARNING_PREFIX)]
        assert len(warnings) == 1 and message in warnings[0], run.stderr
        assert program.native(m).read_bytes() == ref[m]
    assert [r.mode for r in records(program)] == [stats.Mode.FALLBACK] * len(cases)
