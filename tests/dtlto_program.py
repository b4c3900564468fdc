"""A small C program built with clang-22 for DTLTO tests: three ThinLTO objects, one of them in an archive."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from goma_ext.remote import stats

GOMA_EXT = str(Path(sys.executable).parent / "goma-ext")
CLANG = "clang-22"
EXPECTED_OUTPUT = "11 -3\n"
SOURCES = {
    "util.c": "int scale(int x) { return x * 3 + 1; }\nint twice(int x) { return scale(x) + scale(x + 1); }\n",
    "lib.c": "int scale(int);\nint offset(int x) { return scale(x) - 7; }\n",
    "main.c": '#include <stdio.h>\nint twice(int); int offset(int);\n'
              'int main(int argc, char **argv) {\n'
              '  (void)argv; printf("%d %d\\n", twice(argc), offset(argc)); return 0;\n}\n',
}
WITH_ARCHIVE = ("util.o", "main.o", "liblib.a")
OBJECTS_ONLY = ("util.o", "main.o", "lib.o")


def run(cmd: Sequence[str], cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, env=env, check=False, timeout=300)


def build(work: Path) -> Path:
    """WORK with the three objects compiled (-O2 -flto=thin) and lib.o also in liblib.a."""
    work.mkdir(parents=True)
    for name, text in SOURCES.items():
        (work / name).write_text(text)
    for cmd in ([CLANG, "-O2", "-flto=thin", "-c", *SOURCES], ["llvm-ar-22", "rcs", "liblib.a", "lib.o"]):
        done = run(cmd, work)
        if done.returncode != 0:
            raise RuntimeError(f"{cmd}: {done.stderr}")
    return work


def link(work: Path, *extra: str, out: str = "app", dist: Sequence[str] = (), inputs: Sequence[str] = WITH_ARCHIVE,
         env: Mapping[str, str] | None = None, distributor: str = GOMA_EXT) -> subprocess.CompletedProcess[str]:
    """clang-22 linking INPUTS with goma-ext (or DISTRIBUTOR) as the DTLTO distributor, DIST its options."""
    options = ",".join(("dtlto", *dist))
    return run([CLANG, "-fuse-ld=lld", "-flto=thin", f"-fthinlto-distributor={distributor}",
                f"-Xthinlto-distributor={options}", *extra, *inputs, "-o", out], work, env)


def records(work: Path) -> list[stats.RunRecord]:
    return stats.read(work / "goma_ext_dtlto.jsonl")


def keeper(work: Path, edit: str = "") -> str:
    """A distributor script that keeps lld's job file as kept.json, optionally edits it with the Python
    statements EDIT (on `doc`), then runs goma-ext on it."""
    script = work / "keep.py"
    script.write_text(
        f"#!{sys.executable}\nimport json, os, shutil, sys\n"
        "shutil.copyfile(sys.argv[-1], 'kept.json')\n"
        "doc = json.load(open(sys.argv[-1]))\n"
        f"{edit}\n"
        "json.dump(doc, open(sys.argv[-1], 'w'))\n"
        f"os.execv({GOMA_EXT!r}, [{GOMA_EXT!r}, *sys.argv[1:]])\n"
    )
    script.chmod(0o755)
    return str(script)
