"""`python -m bench index`: time listing a ThinLTO index's imports — our decoder vs llvm-bcanalyzer vs .imports.

For each size N it builds (once, cached under --workdir) N one-function TUs plus a main calling all of
them, runs `ld.lld --thinlto-index-only --thinlto-emit-imports-files`, and times, on main's index
(N + 1 modules): goma_ext.bitcode.index.read_index (module table only, and full decode with summary counts),
spawning `llvm-bcanalyzer -dump` and parsing its ENTRY records, and reading main.o.imports.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from goma_ext.bitcode.index import read_index

DEFAULT_SIZES = (200, 2000)
BATCH = 100
_ENTRY = re.compile(r"<ENTRY [^>]*/> record string = '(.*)'$", re.MULTILINE)


@dataclass(frozen=True)
class Row:
    modules: int
    index_bytes: int
    ours_ms: float
    ours_full_ms: float
    bcanalyzer_ms: float
    imports_file_ms: float
    ratio: float  # ours / bcanalyzer, median of paired rounds


def _run(cmd: Sequence[str], cwd: Path) -> None:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"bench: {' '.join(cmd[:4])}… failed: {proc.stderr[-1000:]}")


def build_workspace(root: Path, n: int, llvm_bin: Path) -> Path:
    """N leaf TUs + main; returns main's index. Reused when already built."""
    index = root / "main.o.thinlto.bc"
    if index.exists():
        return index
    (root / "src").mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"src/m{i}.c").write_text(f"int f{i}(int x) {{ return x * {i + 3} + 1; }}\n")
    decls = "".join(f"int f{i}(int);\n" for i in range(n))
    calls = " + ".join(f"f{i}(argc)" for i in range(n))
    (root / "src/main.c").write_text(f"{decls}int main(int argc, char **argv) {{ return {calls}; }}\n")
    sources = [f"src/m{i}.c" for i in range(n)] + ["src/main.c"]
    clang = [str(llvm_bin / "clang"), "-O2", "-flto=thin", "-c"]
    (root / "obj").mkdir(exist_ok=True)
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        batches = [sources[k : k + BATCH] for k in range(0, len(sources), BATCH)]
        for f in [pool.submit(_run, clang + [f"../{s}" for s in batch], root / "obj") for batch in batches]:
            f.result()
    for name in os.listdir(root / "obj"):
        os.replace(root / "obj" / name, root / name)
    objects = ["main.o"] + [f"m{i}.o" for i in range(n)]
    _run([str(llvm_bin / "ld.lld"), "--thinlto-index-only", "--thinlto-emit-imports-files", "-e", "main", "-o", "prog",
          *objects], root)
    return index


def _timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def measure(index: Path, bcanalyzer: str, repeat: int) -> Row:
    """Paired, interleaved runs: each round times every method once, so they see the same machine load;
    the ratio is the median of the per-round ratios, the times are per-method medians."""
    own = "main.o"
    imports_file = index.with_name("main.o.imports")
    methods: dict[str, Callable[[], object]] = {
        "ours": lambda: read_index(index, summaries=False).imported_paths(own),
        "ours_full": lambda: read_index(index).imported_paths(own),
        "bcanalyzer": lambda: [p for p in _ENTRY.findall(_dump(bcanalyzer, index)) if p != own],
        "imports": lambda: imports_file.read_text().splitlines(),
    }
    results = {name: sorted(fn()) for name, fn in methods.items()}  # also warms caches
    if not results["ours"] == results["ours_full"] == results["bcanalyzer"] == results["imports"]:
        sys.exit(f"bench: import lists disagree on {index}: " + ", ".join(f"{k} {len(v)}" for k, v in results.items()))
    samples: dict[str, list[float]] = {name: [] for name in methods}
    ratios = []
    for _ in range(repeat):
        for name, fn in methods.items():
            samples[name].append(_timed_ms(fn))
        ratios.append(samples["ours"][-1] / samples["bcanalyzer"][-1])
    med = {name: statistics.median(v) for name, v in samples.items()}
    return Row(
        modules=len(results["ours"]) + 1, index_bytes=index.stat().st_size, ours_ms=med["ours"],
        ours_full_ms=med["ours_full"], bcanalyzer_ms=med["bcanalyzer"], imports_file_ms=med["imports"],
        ratio=statistics.median(ratios),
    )


def _dump(bcanalyzer: str, path: Path) -> str:
    return subprocess.run([bcanalyzer, "-dump", str(path)], capture_output=True, text=True, check=True).stdout


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} {platform.release()}"


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench index", description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="module counts (default: %(default)s)")
    p.add_argument("--repeat", type=int, default=30, help="timed rounds (each runs every method once); medians reported")
    p.add_argument("--workdir", type=Path, default=Path("out/bench-index"), help="cache of generated workspaces")
    p.add_argument("--llvm", type=int, default=19, help="LLVM major version of clang/lld/llvm-bcanalyzer")
    args = p.parse_args(argv)
    llvm_bin = Path(f"/usr/lib/llvm-{args.llvm}/bin")
    print(f"machine: {machine()}")
    print(f"{'modules':>7} {'index':>9} {'ours':>9} {'ours+sum':>9} {'bcanalyzer':>10} {'.imports':>9} {'ours/bca':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        index = build_workspace(args.workdir / f"llvm{args.llvm}-n{n}", n, llvm_bin)
        r = measure(index, str(llvm_bin / "llvm-bcanalyzer"), args.repeat)
        print(f"{r.modules:>7} {r.index_bytes:>8}B {r.ours_ms:>7.2f}ms {r.ours_full_ms:>7.2f}ms "
              f"{r.bcanalyzer_ms:>8.2f}ms {r.imports_file_ms:>7.3f}ms {r.ratio:>8.3f}")
    return 0
