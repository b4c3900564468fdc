"""File-system edges shared by the benchmarks: write a synthetic workspace, read ninja file statistics."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # bench.subjects writes its workspaces with this module
    from bench.subjects.synth import Workspace

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "chromium_style"
_BUILD_EDGE = re.compile(r"build (?:[^:$]|\$.)*:\s*(\S+)")


def write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text() == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def write_workspace(ws: Workspace, root: Path) -> Path:
    """Write WS under ROOT (unchanged files keep their mtimes) with the example's //build; return ROOT."""
    wanted = {rel for rel, _ in ws.files}
    for rel, text in ws.files:
        write_if_changed(root / rel, text)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and not rel.startswith(("build/", "out")) and rel not in wanted:
            path.unlink()
    copy_tree(EXAMPLE / "build", root / "build")
    return root


def copy_tree(src: Path, dst: Path) -> None:
    """Copy SRC over DST, leaving unchanged files (and their mtimes) alone; Python caches are not sources."""
    for path in sorted(src.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            write_if_changed(dst / path.relative_to(src), path.read_text())


@dataclass(frozen=True)
class NinjaFiles:
    files: int
    bytes: int
    edges: int
    edges_by_rule: dict[str, int]


def ninja_files(out_dir: Path) -> NinjaFiles:
    """Every *.ninja file under OUT_DIR (the manifest ninja loads): count, bytes, build statements by rule."""
    rules: Counter[str] = Counter()
    files = size = 0
    for path in out_dir.rglob("*.ninja"):
        files += 1
        size += path.stat().st_size
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith("build "):
                    m = _BUILD_EDGE.match(line)
                    if m:
                        rules[m.group(1)] += 1
    return NinjaFiles(files, size, sum(rules.values()), dict(sorted(rules.items())))


def remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def scratch_dir(cache: Path, prefix: str) -> Path:
    """A new directory under the benchmark cache, which a new machine does not have yet."""
    cache.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=cache))
