"""A small C program compiled to ThinLTO bitcode and thin-linked with lld-19 --thinlto-index-only (tests, benchmarks).

Layout (exec root = workspace root): src/*.c, build directory out/, objects out/obj/*.o, per-module indexes
out/obj/*.o.thinlto.bc. Backend commands run in out/ with relative paths only, like a GN build's.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

CLANG = "clang-19"
LLD = "/usr/bin/ld.lld-19"
MODULES = ("main", "alpha", "beta", "gamma", "delta")

SOURCES = {
    "main": """
#include <stdio.h>
int alpha(int); int beta(int); int gamma_(int); int delta(int);
int main(void) {
  long s = 0;
  for (int i = 0; i < 1000; i++) s += alpha(i) + beta(i) + gamma_(i) + delta(i);
  if (s != EXPECTED) { printf("self-check FAILED: %ld\\n", s); return 1; }
  printf("self-check ok\\n");
  return 0;
}
""",
    "alpha": "int beta(int); static int sq(int x) { return x * x; }\nint alpha(int x) { return sq(x) % 97 + beta(x); }\n",
    "beta": "int gamma_(int); int beta(int x) { return (x * 7 + gamma_(x)) % 101; }\n",
    "gamma": "int delta(int); int gamma_(int x) { return delta(x) ^ (x << 1); }\n",
    "delta": "int delta(int x) { return (x * 31 + 17) % 1009; }\n",
}


@dataclass(frozen=True)
class ThinProgram:
    """A workspace with bitcode and indexes ready for backends."""

    root: Path

    @property
    def out(self) -> Path:
        return self.root / "out"

    def backend(self, module: str, compiler: str = CLANG, extra: tuple[str, ...] = ()) -> list[str]:
        """The backend command for one module, relative to out/."""
        return [
            compiler, "-c", "-O2", "-x", "ir", f"obj/{module}.o", f"-fthinlto-index=obj/{module}.o.thinlto.bc",
            *extra, "-o", f"obj/{module}.native.o",
        ]

    def native(self, module: str) -> Path:
        return self.out / "obj" / f"{module}.native.o"

    def link_and_check(self) -> str:
        """Final link of the native objects (local) and the binary's self-check output."""
        objs = [f"obj/{m}.native.o" for m in MODULES]
        subprocess.run([CLANG, f"--ld-path={LLD}", *objs, "-o", "prog"], cwd=self.out, check=True)
        return subprocess.run(["./prog"], cwd=self.out, capture_output=True, text=True, check=True).stdout.strip()

    def copy(self, dest: Path) -> ThinProgram:
        shutil.copytree(self.root, dest, symlinks=True)
        return ThinProgram(dest)


def _expected() -> int:
    def delta(x: int) -> int:
        return (x * 31 + 17) % 1009

    def gamma(x: int) -> int:
        return delta(x) ^ (x << 1)

    def beta(x: int) -> int:
        return (x * 7 + gamma(x)) % 101

    def alpha(x: int) -> int:
        return (x * x) % 97 + beta(x)

    return sum(alpha(i) + beta(i) + gamma(i) + delta(i) for i in range(1000))


def build(root: Path) -> ThinProgram:
    """Write the sources, compile to ThinLTO bitcode and run the distributed thin link."""
    (root / "src").mkdir(parents=True)
    (root / "out" / "obj").mkdir(parents=True)
    for name, text in SOURCES.items():
        (root / "src" / f"{name}.c").write_text(text.replace("EXPECTED", f"{_expected()}L"))
    out = root / "out"
    for name in MODULES:
        subprocess.run(
            [CLANG, "-O2", "-flto=thin", "-c", f"../src/{name}.c", "-o", f"obj/{name}.o"], cwd=out, check=True
        )
    objs = [f"obj/{m}.o" for m in MODULES]
    subprocess.run(
        [CLANG, f"--ld-path={LLD}", "-flto=thin", "-Wl,--thinlto-index-only", "-Wl,--thinlto-emit-imports-files",
         *objs, "-o", "prog"],
        cwd=out, check=True,
    )
    (out / "link.rsp").write_text("\n".join(objs) + "\n")
    return ThinProgram(root)
