"""Test helper: generate a many-TU ThinLTO program, compile it and run lld's distributed thin link on it.

Layout (all paths relative to the workspace root, which is lld's and the backends' working directory):
  obj/tN.o          plain objects on the link line
  lib/libstatic.a   a regular archive; lib/libthin.a a thin archive; obj/lazy/* between --start-lib/--end-lib
  one member of each lazy kind defines only a function nobody calls, so lld marks its index "skip".
Function fN calls f(N+1) and one more later function, so everything but the unused members is linked;
main calls every STRIDE-th function, so its index names many modules.
"""

from __future__ import annotations

import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

COMPILE_BATCH = 60
JOBS = 2


@dataclass(frozen=True)
class Layout:
    """How many TUs of each kind. The default's 100 give main's index over 50 modules (every second function
    called); each test reads every index file, and each one is a llvm-bcanalyzer run (300 TUs cost ~40 CPU s
    more over both LLVM versions and checked nothing else)."""

    plain: int = 60
    static: int = 16
    thin: int = 12
    startlib: int = 12
    main_stride: int = 2

    @property
    def total(self) -> int:
        return self.plain + self.static + self.thin + self.startlib


@dataclass(frozen=True)
class Workspace:
    root: Path
    llvm_bin: Path
    layout: Layout
    unused: tuple[str, ...]  # object paths of the unused lazy members
    link_inputs: tuple[str, ...]  # the thin-link command's input arguments

    def tool(self, name: str) -> str:
        return str(self.llvm_bin / name)

    def index_files(self) -> list[Path]:
        return sorted(self.root.rglob("*.thinlto.bc"))


def _kind(i: int, layout: Layout) -> str:
    if i < layout.plain:
        return "plain"
    if i < layout.plain + layout.static:
        return "static"
    if i < layout.plain + layout.static + layout.thin:
        return "thin"
    return "startlib"


def _source(i: int, n: int) -> str:
    callees = sorted({j for j in (i + 1, i + 2 + (i * 7) % 11) if j < n})
    decls = "".join(f"int f{j}(int);\n" for j in callees)
    body = " ^ ".join([f"f{j}(x + {k})" for k, j in enumerate(callees)] + [f"(x * {i + 3})"])
    return f"{decls}int f{i}(int x) {{ return {body}; }}\n"


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[:6])}… failed ({proc.returncode}): {proc.stderr[-2000:]}")


def build(root: Path, llvm_bin: Path, layout: Layout = Layout()) -> Workspace:
    """Write sources, compile them with -flto=thin, archive, and run the distributed thin link."""
    n = layout.total
    dirs = {"plain": "obj", "static": "obj/static", "thin": "obj/thin", "startlib": "obj/lazy"}
    for d in (*dirs.values(), "src", "lib"):
        (root / d).mkdir(parents=True, exist_ok=True)
    objects: dict[str, list[str]] = {k: [] for k in dirs}
    jobs: list[tuple[str, str]] = []
    for i in range(n):
        (root / f"src/t{i}.c").write_text(_source(i, n))
        obj = f"{dirs[_kind(i, layout)]}/t{i}.o"
        objects[_kind(i, layout)].append(obj)
        jobs.append((f"src/t{i}.c", obj))
    unused = []
    for kind in ("static", "thin", "startlib"):
        (root / f"src/unused_{kind}.c").write_text(f"int unused_{kind}(int x) {{ return x + {len(kind)}; }}\n")
        obj = f"{dirs[kind]}/unused_{kind}.o"
        objects[kind].append(obj)
        jobs.append((f"src/unused_{kind}.c", obj))
        unused.append(obj)
    calls = " + ".join(f"f{i}(argc)" for i in range(0, n, layout.main_stride))
    decls = "".join(f"int f{i}(int);\n" for i in range(0, n, layout.main_stride))
    (root / "src/main.c").write_text(f"{decls}int main(int argc, char **argv) {{ return {calls}; }}\n")
    jobs.append(("src/main.c", "obj/main.o"))
    clang = str(llvm_bin / "clang")
    with ThreadPoolExecutor(JOBS) as pool:
        batches = [jobs[k : k + COMPILE_BATCH] for k in range(0, len(jobs), COMPILE_BATCH)]
        futures = [pool.submit(_compile_batch, clang, root, b) for b in batches]
        for f in futures:
            f.result()
    ar = str(llvm_bin / "llvm-ar")
    _run([ar, "rcs", "lib/libstatic.a", *objects["static"]], root)
    _run([ar, "rcs", "--thin", "lib/libthin.a", *objects["thin"]], root)
    link_inputs = ("obj/main.o", *objects["plain"], "lib/libstatic.a", "lib/libthin.a",
                   "--start-lib", *objects["startlib"], "--end-lib")
    _run([str(llvm_bin / "ld.lld"), "--thinlto-index-only", "--thinlto-emit-imports-files", "-e", "main",
          "-o", "prog", *link_inputs], root)
    return Workspace(root, llvm_bin, layout, tuple(unused), link_inputs)


def _compile_batch(clang: str, root: Path, batch: list[tuple[str, str]]) -> None:
    # One driver per batch (cc1 runs in-process), then move each output where it belongs.
    tmp = root / f"tmp{os.getpid()}_{batch[0][1].replace('/', '_')}"
    tmp.mkdir()
    _run([clang, "-O2", "-flto=thin", "-c", *[str(root / src) for src, _ in batch]], tmp)
    for src, obj in batch:
        (tmp / (Path(src).stem + ".o")).rename(root / obj)
    tmp.rmdir()


@dataclass(frozen=True)
class DumpedIndex:
    """What `llvm-bcanalyzer -dump` shows of an index: module table (modid -> path, hash words) and counts."""

    modules: dict[int, tuple[str, tuple[int, ...] | None]]
    combined_by_modid: dict[int, int]
    flags: int | None
    guids_by_modid: dict[int, list[int]]  # GUIDs of the combined summaries, per module id


_ENTRY = re.compile(r"<ENTRY [^>]*?op0=(\d+)[^>]*/> record string = '(.*)'$")
_HASH = re.compile(r"<HASH [^>]*?op0=(\d+) op1=(\d+) op2=(\d+) op3=(\d+) op4=(\d+)/>")
_COMBINED = re.compile(r"<COMBINED(?:_PROFILE|_GLOBALVAR_INIT_REFS|_ALIAS)? [^>]*?op0=(\d+) op1=(\d+)")
_VALUE_GUID = re.compile(r"<VALUE_GUID [^>]*?op0=(\d+) op1=(-?\d+)(?: op2=(\d+))?/>")
_FLAGS = re.compile(r"<FLAGS op0=(\d+)/>")


def bcanalyzer_dump(bcanalyzer: str, path: Path) -> DumpedIndex:
    text = subprocess.run([bcanalyzer, "-dump", str(path)], capture_output=True, text=True, check=True).stdout
    modules: dict[int, tuple[str, tuple[int, ...] | None]] = {}
    combined: dict[int, int] = {}
    flags = None
    last = None
    guids: dict[int, int] = {}
    summaries: list[tuple[int, int]] = []
    for line in text.splitlines():
        line = line.strip()
        if m := _ENTRY.search(line):
            last = int(m.group(1))
            modules[last] = (m.group(2), None)
        elif (m := _HASH.search(line)) and last is not None:
            modules[last] = (modules[last][0], tuple(int(g) for g in m.groups()))
        elif m := _COMBINED.search(line):
            combined[int(m.group(2))] = combined.get(int(m.group(2)), 0) + 1
            summaries.append((int(m.group(1)), int(m.group(2))))
        elif m := _VALUE_GUID.search(line):
            # LLVM <= 19: op1 is the GUID, printed as a signed int64; LLVM >= 20: op1/op2 are its halves
            guid = int(m.group(2)) % 2**64 if m.group(3) is None else int(m.group(2)) << 32 | int(m.group(3))
            guids[int(m.group(1))] = guid
        elif m := _FLAGS.search(line):
            flags = int(m.group(1))
    by_modid: dict[int, list[int]] = {}
    for valueid, modid in summaries:
        if valueid in guids:
            by_modid.setdefault(modid, []).append(guids[valueid])
    return DumpedIndex(modules, combined, flags, by_modid)


_BLOCK_ID = re.compile(r"^\s*Block ID #(\d+)")
_INSTANCES = re.compile(r"Num Instances:\s+(\d+)")
_RECORDS = re.compile(r"(?:Num Records|Tot/Avg Records):\s+(\d+)")


def bcanalyzer_block_stats(bcanalyzer: str, path: Path) -> dict[int, tuple[int, int]]:
    """Block id -> (instances, records) from llvm-bcanalyzer's per-block summary."""
    text = subprocess.run([bcanalyzer, str(path)], capture_output=True, text=True, check=True).stdout
    stats: dict[int, list[int]] = {}
    current = None
    for line in text.splitlines():
        if m := _BLOCK_ID.match(line):
            current = int(m.group(1))
            stats[current] = [0, 0]
        elif current is not None and (m := _INSTANCES.search(line)):
            stats[current][0] = int(m.group(1))
        elif current is not None and (m := _RECORDS.search(line)):
            stats[current][1] = int(m.group(1))
    return {k: (v[0], v[1]) for k, v in stats.items()}
