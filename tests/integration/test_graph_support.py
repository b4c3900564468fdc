"""Helpers shared by the [graph] integration tests (no tests here): set up a workspace, build, read logs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gn_thinlto.analysis.parity import linked_binaries
from tests.builds import REPO, Build, copy_build_dir, gen_and_build, gn_thinlto  # noqa: F401 (re-exported)

WORKSPACES = REPO / "tests" / "workspaces"
OBJDUMP = "/usr/lib/llvm-19/bin/llvm-objdump"
NM = "/usr/lib/llvm-19/bin/llvm-nm"


def executables(b: Build) -> list[str]:
    """Every executable GN declared for B's build directory (file names), from the hook's project.json copy."""
    project = json.loads((b.out / "gn-thinlto" / "project.json").read_text())
    return sorted(Path(t["outputs"][0]).name for t in project["targets"].values() if t["type"] == "executable")


def copy_workspace(name: str, dest: Path) -> Path:
    root = dest / name
    shutil.copytree(WORKSPACES / name, root)
    return root


def plain_build(root: Path, out: Path, args: str = "", targets: tuple[str, ...] = ()) -> Build:
    """GN's own graph (in-process ThinLTO in lld), for comparisons: TARGETS, or everything."""
    cmd = ["gn", "gen", str(out), f"--root={root}"] + ([f"--args={args}"] if args else [])
    subprocess.run(cmd, check=True, capture_output=True)
    b = Build(root, out)
    b.ninja(*targets)
    return b


def relinked_in_process(graph: Build, out: Path, args: str, targets: tuple[str, ...],
                        not_thinlto: tuple[str, ...] = ()) -> Build:
    """GRAPH's build directory copied to OUT (as deep as GRAPH's, so its relative paths hold) and generated again as
    GN's own graph with ARGS (GRAPH's), for comparisons: the compiles are GRAPH's, only TARGETS' links run, with
    lld's in-process ThinLTO (checked: no object compiled again, every linked binary in OUT linked again but those
    of NOT_THINLTO, links the graph left to GN, whose commands do not change)."""
    copy_build_dir(graph.out, out)
    shutil.rmtree(out / "gn-thinlto")  # the graph's state; the example's GN guard refuses a plain `gn gen` beside it
    objects = {p: p.stat().st_mtime_ns for p in (out / "obj").rglob("*.o")}
    assert objects
    b = plain_build(graph.root, out, args, targets)
    assert {p: p.stat().st_mtime_ns for p in objects} == objects, "the in-process build compiled again"
    linked = list(linked_binaries(out))
    kept = [rel for rel in linked if (graph.out / rel).is_file()
            and (out / rel).stat().st_mtime_ns == (graph.out / rel).stat().st_mtime_ns]
    assert linked and not set(kept) - set(not_thinlto), f"left as the graph linked them: {kept}"
    return b


def disassembly(binary: Path) -> str:
    return subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", str(binary)],
                          capture_output=True, text=True, check=True).stdout


def defined_functions(binary: Path) -> set[str]:
    syms = subprocess.run([NM, "--defined-only", str(binary)], capture_output=True, text=True, check=True).stdout
    return {line.split()[-1] for line in syms.splitlines() if len(line.split()) == 3 and line.split()[1] in "tTwW"}


def text_size(binary: Path) -> int:
    out = subprocess.run([OBJDUMP, "-h", str(binary)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) > 2 and parts[1] == ".text":
            return int(parts[2], 16)
    raise AssertionError(f"no .text in {binary}")


def same_code(got: Path, want: Path, names: Sequence[str]) -> list[str]:
    """Each of NAMES (paths under GOT and WANT) has the same defined functions in both and a .text within 2% of
    WANT's (what a DTLTO link is held to against lld's in-process one); a line per binary, for a test to print."""
    lines = []
    for name in names:
        functions, text, want_text = defined_functions(got / name), text_size(got / name), text_size(want / name)
        assert functions == defined_functions(want / name), name
        assert abs(text - want_text) <= 0.02 * want_text, f"{name}: {text} vs {want_text}"
        lines.append(f"{name}: {len(functions)} functions, .text {text} vs {want_text}")
    return lines


def section_bytes(binary: Path, section: str) -> bytes:
    out = subprocess.run([OBJDUMP, "-s", f"--section={section}", str(binary)],
                         capture_output=True, text=True, check=True)
    return "\n".join(out.stdout.splitlines()[3:]).encode()


def unstripped(out: Path, name: str) -> Path:
    """The unstripped copy of binary NAME (Chromium's exe.unstripped/, lib.unstripped/), else NAME itself."""
    for sub in ("exe.unstripped", "lib.unstripped"):
        if (out / sub / name).is_file():
            return out / sub / name
    return out / name


def code_modulo_plt(binary: Path) -> str:
    """BINARY's disassembly without addresses, with calls into the PLT named by symbol alone and the .plt
    section left out: the code, independent of the order of the PLT's slots (which follows the order in
    which lld first saw each symbol)."""
    text = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", "--no-addresses", str(binary)],
                          capture_output=True, text=True, check=True).stdout
    sections = re.split(r"^(?=Disassembly of section )", text, flags=re.MULTILINE)[1:]
    code = "".join(s for s in sections if not s.startswith("Disassembly of section .plt"))
    return re.sub(r"0x[0-9a-f]+ <([^>]*@plt)>", r"<\1>", code)


def section_table(binary: Path) -> list[tuple[str, str]]:
    """(name, size) of every section, in file order."""
    out = subprocess.run([OBJDUMP, "-h", str(binary)], capture_output=True, text=True, check=True).stdout
    return [(p[1], p[2]) for p in (line.split() for line in out.splitlines()) if len(p) > 2 and p[0].isdigit()]


def dynamic_symbols(binary: Path) -> set[str]:
    out = subprocess.run([NM, "-D", "--format=posix", str(binary)], capture_output=True, text=True, check=True).stdout
    return {" ".join(line.split()[:2]) for line in out.splitlines()}


def index_snapshot(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in (out / "gn-thinlto").glob("*/index/**/*.thinlto.bc")}


def native_of(index_path: str) -> str:
    """gn-thinlto/T/index/OBJ.thinlto.bc -> gn-thinlto/T/native/OBJ."""
    head, _, rest = index_path.partition("/index/")
    return f"{head}/native/{rest.removesuffix('.thinlto.bc')}"


@dataclass(frozen=True)
class Rebuild:
    ran: list[str]  # outputs of every edge ninja ran (from .ninja_log)
    backends: set[str]  # natives whose backend ran
    changed_index: set[str]  # index files whose content changed
    cache_lines: list[str]  # backend.log lines written by this build


def edit_and_rebuild(b: Build, source: str, old: str, new: str) -> Rebuild:
    path = b.root / source
    text = path.read_text()
    assert old in text, (source, old)
    before_log = len(b.log_entries())
    before_index = index_snapshot(b.out)
    cache_log = b.out / "gn-thinlto" / "backend.log"
    before_cache = cache_log.read_text().splitlines() if cache_log.exists() else []
    path.write_text(text.replace(old, new, 1))
    b.ninja()
    after_index = index_snapshot(b.out)
    ran = b.ran_since(before_log)
    return Rebuild(
        ran=ran,
        backends={o for o in ran if "/native/" in o},
        changed_index={p for p, data in after_index.items() if before_index.get(p) != data},
        cache_lines=cache_log.read_text().splitlines()[len(before_cache):],
    )
