"""The four ways of building a subject, side by side: (a) in-process ThinLTO, (b) (a) with lld's ThinLTO cache,
(c) our graph run locally, (d) our graph with backends on the local REAPI cluster.

Each variant knows how to configure a build directory and how to count the backend jobs a build ran.
"""

from __future__ import annotations

import enum
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from bench import graph_tool
from bench.measure import run

LLD_CACHE = "thinlto-cache"
GRAPH_BACKEND_LOG = "gn-thinlto/backend.log"
_EDGE_LINE = re.compile(r"^\[\d+/\d+\] (\S+) (\S+)", re.MULTILINE)


class Variant(enum.Enum):
    IN_PROCESS = "a"
    LLD_CACHE = "b"
    GRAPH = "c"
    REMOTE = "d"

    @property
    def title(self) -> str:
        return {"a": "(a) in-process", "b": "(b) +lld cache", "c": "(c) graph", "d": "(d) graph+remote"}[self.value]


def configure(variant: Variant, out_dir: Path, root: Path, gn_args: str, env: Mapping[str, str] | None = None) -> float:
    """Create OUT_DIR for VARIANT; return the generation wall time (gn gen, plus the hook for c/d)."""
    if variant in (Variant.IN_PROCESS, Variant.LLD_CACHE):
        s = graph_tool.gn_gen(out_dir, root, gn_args)
        if variant is Variant.LLD_CACHE:
            add_lld_cache(out_dir)
        return s.wall_s
    cmd = [sys.executable, "-m", "gn_thinlto.cli", "gen", str(out_dir), "--root", str(root)]
    if gn_args:
        cmd += ["--args", gn_args]
    return run(cmd, env=env).wall_s


def add_lld_cache(out_dir: Path) -> None:
    """(b): every link and solink rule in GN's toolchain.ninja gets -Wl,--thinlto-cache-dir (relative to OUT)."""
    path = out_dir / "toolchain.ninja"
    text, n = re.subn(r"^(rule (?:link|solink)\n  command = \S+ )", rf"\1-Wl,--thinlto-cache-dir={LLD_CACHE} ",
                      path.read_text(), flags=re.MULTILINE)
    if n != 2:
        raise ValueError(f"{path}: expected a link and a solink rule to add the ThinLTO cache to, found {n}")
    path.write_text(text)


@dataclass(frozen=True)
class Counters:
    """What to read before and after a build to count the backend jobs it ran."""

    lld_cache_entries: int
    backend_log_bytes: int


def counters(out_dir: Path) -> Counters:
    cache = out_dir / LLD_CACHE
    entries = sum(1 for p in cache.glob("llvmcache-*")) if cache.is_dir() else 0
    log = out_dir / GRAPH_BACKEND_LOG
    return Counters(entries, log.stat().st_size if log.is_file() else 0)


def backend_log_misses(out_dir: Path, since: Counters) -> tuple[int, int]:
    """(c)/(d): (compiler runs, cache hits) logged by the backend step since SINCE."""
    log = out_dir / GRAPH_BACKEND_LOG
    if not log.is_file():
        return 0, 0
    with log.open("rb") as f:
        f.seek(since.backend_log_bytes)
        lines = f.read().decode().splitlines()
    return sum(l.startswith("miss ") for l in lines), sum(l.startswith("hit ") for l in lines)


def edges_run(ninja_output: str) -> list[tuple[str, str]]:
    """(DESCRIPTION WORD, first output) of every edge a ninja run printed, e.g. ("LINK", "./calc")."""
    return _EDGE_LINE.findall(ninja_output)
