"""The ways of building a subject, side by side: (a) in-process ThinLTO, (b) (a) with lld's ThinLTO cache,
(c) our graph run locally, (d) our graph with backends on the local REAPI cluster, (e) (c) without dyndep
(config `dyndep: false`, for builders such as Siso), (f) (c) without partition edges (config
`lto_partitions: off`: the thin link compiles the regular-LTO module itself).

Each variant knows how to configure a build directory and how to count the backend jobs a build ran.
"""

from __future__ import annotations

import enum
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from bench import graph_tool
from bench.measure import run

LLD_CACHE = "thinlto-cache"  # the example's -Wl,--thinlto-cache-dir
GRAPH_BACKEND_LOG = "gn-thinlto/backend.log"
REMOTE_STATS_LOG = "gn_thinlto_remote.jsonl"  # goma_ext.remote.config.DEFAULT_STATS_LOG
# The side-by-side ratios of the builds benchmark: (column header, key in its results JSON).
RATIO_COLUMNS = (
    ("c / a wall", "c_vs_a_wall"), ("c / b wall", "c_vs_b_wall"), ("a / c (speed-up)", "a_vs_c_speedup"),
    ("c / a CPU", "c_vs_a_cpu"), ("c / a peak link RSS", "c_vs_a_rss"), ("d / a wall", "d_vs_a_wall"),
    ("d / c wall", "d_vs_c_wall"), ("e / c wall", "e_vs_c_wall"), ("e / a wall", "e_vs_a_wall"),
    ("c / f wall", "c_vs_f_wall"), ("c / f thin-link s", "c_vs_f_thin_link"),
)
_EDGE_LINE = re.compile(r"^\[\d+/\d+\] (\S+) (\S+)", re.MULTILINE)


class Variant(enum.Enum):
    IN_PROCESS = "a"
    LLD_CACHE = "b"
    GRAPH = "c"
    REMOTE = "d"
    NO_DYNDEP = "e"
    NO_PARTITIONS = "f"

    @property
    def title(self) -> str:
        return {"a": "(a) in-process", "b": "(b) +lld cache", "c": "(c) graph", "d": "(d) graph+remote",
                "e": "(e) graph, no dyndep", "f": "(f) graph, no partition edges"}[self.value]

    @property
    def is_graph_local(self) -> bool:
        """Built by our graph on this machine (the backend step's log counts its jobs)."""
        return self in (Variant.GRAPH, Variant.NO_DYNDEP, Variant.NO_PARTITIONS)


def configure(variant: Variant, out_dir: Path, root: Path, gn_args: str, endpoint: str | None = None,
              partitions: int = 0, download: str = "all", compression: str = "off") -> float:
    """Create OUT_DIR for VARIANT; return the generation wall time (gn gen, plus the hook for c/d). PARTITIONS:
    the graph variants but (f) get `lto_partitions: PARTITIONS` (0: the default, auto); DOWNLOAD: (d)'s
    `remote.download`; COMPRESSION: its `remote.compression`."""
    if variant in (Variant.IN_PROCESS, Variant.LLD_CACHE):
        # The example's official flags include lld's ThinLTO cache (thinlto-cache in OUT, Chromium's place);
        # (a) turns it off with Chromium's build arg.
        cache_arg = "" if variant is Variant.LLD_CACHE else "thin_lto_enable_cache=false"
        return graph_tool.gn_gen(out_dir, root, " ".join(a for a in (gn_args, cache_arg) if a)).wall_s
    cmd = [sys.executable, "-m", "gn_thinlto.cli", "gen", str(out_dir), "--root", str(root)]
    if gn_args:
        cmd += ["--args", gn_args]
    if variant is Variant.REMOTE:
        if endpoint is None:
            raise ValueError("variant d needs a cluster endpoint")
        cmd += ["--remote", endpoint]
    settings = {Variant.NO_DYNDEP: "dyndep: false\n", Variant.NO_PARTITIONS: "lto_partitions: off\n"}.get(variant, "")
    if partitions and variant is not Variant.NO_PARTITIONS:
        settings += f"lto_partitions: {partitions}\n"
    remote = {k: v for k, v, default in (("download", download, "all"), ("compression", compression, "off"))
              if v != default}
    if remote and variant is Variant.REMOTE:
        settings += "remote:\n" + "".join(f"  {k}: {v}\n" for k, v in remote.items())
    if settings:
        config = out_dir.parent / f"{out_dir.name}.gn_thinlto.yaml"
        config.write_text(settings)
        cmd += ["--config", str(config)]
    return run(cmd).wall_s


def build_env(variant: Variant, salt: str) -> dict[str, str] | None:
    """Environment for ninja: (d) gets a cache salt, so one benchmark run's actions start from a cold action
    cache (the wrapper reads GOMA_EXT_CACHE_SALT)."""
    return {"GOMA_EXT_CACHE_SALT": salt} if variant is Variant.REMOTE and salt else None


@dataclass(frozen=True)
class Counters:
    """What to read before and after a build to count the backend jobs it ran."""

    lld_cache_entries: int
    backend_log_bytes: int
    remote_log_bytes: int


def counters(out_dir: Path) -> Counters:
    cache = out_dir / LLD_CACHE
    entries = sum(1 for p in cache.glob("llvmcache-*")) if cache.is_dir() else 0
    log = out_dir / GRAPH_BACKEND_LOG
    remote = out_dir / REMOTE_STATS_LOG
    return Counters(entries, log.stat().st_size if log.is_file() else 0,
                    remote.stat().st_size if remote.is_file() else 0)


def remote_log_counts(out_dir: Path, since: Counters) -> tuple[int, int]:
    """(d): (compiler runs, remote or local fallback; cache hits, the action cache's plus our local backend
    cache's, which sits in front of the wrapper) logged since SINCE."""
    _, local_hits = backend_log_misses(out_dir, since)
    log = out_dir / REMOTE_STATS_LOG
    if not log.is_file():
        return 0, local_hits
    with log.open("rb") as f:
        f.seek(since.remote_log_bytes)
        modes = [json.loads(line)["mode"] for line in f.read().decode().splitlines() if line.strip()]
    hits = sum(m == "cache_hit" for m in modes)
    return len(modes) - hits, hits + local_hits


def backend_durations_ms(out_dir: Path) -> list[int]:
    """Duration of every backend edge in OUT_DIR's .ninja_log (latest entry per output)."""
    latest: dict[str, int] = {}
    for line in (out_dir / ".ninja_log").read_text().splitlines()[1:]:
        start, end, _, output, _ = line.split("\t")
        if output.startswith("gn-thinlto/") and "/native/" in output:
            latest[output] = int(end) - int(start)
    return list(latest.values())


THIN_LINK_OUTPUT = re.compile(r"^gn-thinlto/(.+)/used\.txt$")  # a thin-link edge's first output (the planner's)
PARTITION_OUTPUT = re.compile(r"^gn-thinlto/.+/lto/part\d+\.o$")


def ninja_log_lines(out_dir: Path) -> int:
    log = out_dir / ".ninja_log"
    return len(log.read_text().splitlines()) if log.is_file() else 0


def thin_link_times(out_dir: Path, since_line: int) -> tuple[dict[str, float], float]:
    """(seconds of each thin-link edge by target directory, seconds of all partition edges) that .ninja_log
    recorded after its line SINCE_LINE (the edges one build ran)."""
    lines = (out_dir / ".ninja_log").read_text().splitlines()[max(since_line, 1):]
    thin: dict[str, float] = {}
    partitions = 0.0
    for line in lines:
        start, end, _, output, _ = line.split("\t")
        seconds = (int(end) - int(start)) / 1000
        if m := THIN_LINK_OUTPUT.match(output):
            thin[m.group(1)] = seconds
        elif PARTITION_OUTPUT.match(output):
            partitions += seconds
    return thin, partitions


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
