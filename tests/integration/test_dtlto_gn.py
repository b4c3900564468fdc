"""The "one link edge" alternative: the Chromium-shaped example built by GN alone, its ThinLTO backends run by
`goma-ext dtlto` through ldflags (the example's thin_lto_distributor arg), with clang/lld 22. Compared with
the same build's in-process ThinLTO: the same functions in every binary, .text within 2%."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gn_thinlto.cli.example import run_self_checks
from goma_ext.remote import stats
from tests.conftest import EXAMPLE_ROOT
from tests.dtlto_program import GOMA_EXT
from tests.integration.test_graph_support import defined_functions, same_code, text_size, unstripped

pytestmark = pytest.mark.slow
LLVM_22 = 'clang_base_path="/usr/lib/llvm-22" thin_lto_enable_cache=false'


# One of each kind of link the example has: an executable against the shared library, the shared library, a
# loadable module and its host (an executable of static libraries alone), and the --lto-O0 binary (whole example:
# ~100 more CPU seconds, the same kinds; calc, one more executable of static libraries, ~14)
BUILT = ("archiver", "report_plugin_host", "libreport_plugin.so", "matrix_tool_lto_o0")
EXECUTABLES = ["archiver", "matrix_tool_lto_o0", "report_plugin_host"]


def _build(root: Path, out: Path, args: str) -> None:
    """GN's own graph (no gn-thinlto: the distributor is the one link edge) of BUILT with ARGS."""
    gen = subprocess.run(["gn", "gen", str(out), f"--root={root}", f"--args={args}"], capture_output=True, text=True)
    assert gen.returncode == 0, gen.stdout + gen.stderr
    proc = subprocess.run(["ninja", "-C", str(out), *BUILT], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _binaries(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "exe.unstripped").iterdir()) + sorted(
        p.name for p in (out / "lib.unstripped").iterdir())


def test_example_through_the_distributor_matches_in_process(tmp_path: Path) -> None:
    """The example compiles once: built with lld's in-process backends first, those binaries set aside, then the
    same build directory with the distributor's args, which change the links alone."""
    dist, ref = tmp_path / "out", tmp_path / "inproc"
    _build(EXAMPLE_ROOT, dist, LLVM_22)
    for sub in ("exe.unstripped", "lib.unstripped"):
        shutil.copytree(dist / sub, ref / sub)
    compiled = {p: p.stat().st_mtime_ns for p in (dist / "obj").rglob("*.o")}
    _build(EXAMPLE_ROOT, dist, f'{LLVM_22} thin_lto_distributor="{GOMA_EXT}" '
                               f'thin_lto_distributor_args="dtlto,--cache={tmp_path / "cache"}"')
    assert {p: p.stat().st_mtime_ns for p in compiled} == compiled, "the distributor's args compiled again"
    summary = stats.report(dist, "goma_ext_dtlto.jsonl")
    assert summary["runs"] > 40 and summary["failed"] == 0, summary
    names = _binaries(dist)
    assert names == _binaries(ref) and set(BUILT) <= set(names) and "libcodec.so" in names, names
    executables = sorted(p.name for p in (dist / "exe.unstripped").iterdir())
    assert executables == EXECUTABLES, executables
    checks = run_self_checks(dist, executables)
    assert len(checks) == len(EXECUTABLES) and [c for c in checks if not c.ok] == [], checks
    # LLVM 22's DTLTO gives the distributor only -O<n> (lld's --lto-CGO is lost: --lto-O0 and --lto-O0,--lto-CGO0
    # write the same job file), so matrix_tool_lto_o0's backends generate code at O0 where lld in-process generates
    # it at O2: an upstream limitation, not the distributor's to guess. Its functions are the same, its .text larger.
    o0 = "matrix_tool_lto_o0"
    a, b = unstripped(dist, o0), unstripped(ref, o0)
    assert defined_functions(a) == defined_functions(b) and text_size(a) > 1.5 * text_size(b), o0
    same_code(dist, ref, [str(unstripped(dist, name).relative_to(dist)) for name in names if name != o0])
