"""`python -m bench scale-model`: a Chromium-size official ThinLTO link predicted on 100 and 1,000 remote cores
from measured costs.

Measured inputs (nothing is invented; each is printed with where it came from):
- a clean local build of our graph (`--build-dir DIR`, or `--subject`'s, abseil by default, built fresh in
  CACHE/scale-model/out-SUBJECT with `ninja -j<this machine's cores>`, so that jobs do not queue for a core), from
  its .ninja_log, backend log and thin-link manifests: the duration of every backend edge that ran the compiler (a
  backend-cache miss), the thin link's wall time per bitcode module (the median over the build's links), and the
  largest link's final link wall time per native object;
- RESULTS/proxy.json, written by the proxy benchmark (`--proxy-costs FILE` is read when it is missing): client CPU
  per action on the build machine, the proxy's CPU per action, and the extra wall time of a remote action;
- RESULTS/proxy-shards.json, when there ([scale], `bench proxy-shards`): on a clean build's mix (every action
  executed) through sharded proxies, the proxies' CPU per action, how unevenly the shards share it, the step servers'
  and the whole client side's CPU per action. These replace proxy.json's figures of the same names (measured on
  action-cache hits through one proxy).

Assumptions (the numbers are options; all are printed with the results):
1. Shape: one product link (chrome) of 35,000 bitcode modules with one serial thin link, plus ~300 test binaries
   in shared null-index mode. Their backends are shared with the product's and with each other's, and they need
   no thin link of their own: we count them as 5,000 more distinct backend jobs (40,000 jobs, about the build's
   40,000 bitcode objects).
2. Backend compile time: drawn with replacement (seeded) from the measured distribution, times a factor. The
   model is run at 1× and at 3×, because Chromium's translation units are larger than ninja's and import more.
3. The thin link costs the measured per-module cost (median over the build's links) × the product's modules, and
   the final link the largest link's per-object cost × the product's modules (one native object per module).
   Both run alone, and the factor does not scale them. The fixed start-up cost of a small link is spread here over
   35,000 modules (an overestimate). Larger summaries and more import candidates per module are not modelled (an
   underestimate).
4. Backend phase: all 40,000 jobs start after the thin link, so the test jobs, which could start earlier, get no
   credit. ninja's -j equals the remote cores, and each job holds its slot for its compile time plus the measured
   remote overhead. Jobs go largest first to the slot that frees first (list scheduling). A clean build has no
   action-cache hits. Queueing, worker failures and upload bandwidth are not modelled.
5. The build machine has 32 cores (`--build-cores`). Every action costs client CPU there:
   bound = jobs × client CPU per action / build cores.
6. Each proxy shard is one Python process, serialised by the GIL; the shards run in parallel on the build machine
   ([scale]): bound = jobs × proxy CPU per action × imbalance / shards, where the imbalance is the busiest
   shard's share when the jobs' command lines (all distinct in a build) are hashed over the shards as the client
   hashes them (proxy_protocol.shard_of). The build directory's step servers ([lean]) likewise: bound = jobs ×
   their CPU per action / step servers. Both counts default to what `auto` picks on the build machine's cores
   (one proxy per 2 cores, one step server per 4), and the client bound (5) counts the proxies' CPU too.
7. The backend phase takes the largest of the list-scheduling makespan, the proxy and step-server bounds and the
   client bound: they overlap, they do not add up. The bound that dominates is the largest of five lower bounds:
   remote cores (total job time / cores), the longest single job, the proxy, the step server, the client CPU.
8. Out of scope: compiling the bitcode, the test binaries' own final links (small and in parallel), and the
   REAPI server's capacity (its CPU per action is printed but not used).
"""

from __future__ import annotations

import argparse
import enum
import functools
import heapq
import json
import os
import random
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, fields, replace
from pathlib import Path
from typing import Any

from bench import graph_tool, prereqs, results, subjects, variants
from bench.fsio import REPO, remove
from bench.measure import BenchError, progress, run
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render
from gn_thinlto.analysis import build_log
from gn_thinlto.errors import GnThinltoError
from gn_thinlto.steps.backend_log import CacheEvent
from gn_thinlto.steps.step_args import default_servers
from gn_thinlto.steps.thinlink_paths import PARTITION_DIR
from goma_ext.remote import proxy_protocol as wire

PROXY_RESULTS = "proxy"  # RESULTS/proxy.json, the proxy benchmark's
SHARD_RESULTS = "proxy-shards"  # RESULTS/proxy-shards.json, `bench proxy-shards`'s
PLOT = REPO / "docs" / "bench-scale-model.png"
SEED_LINK_MIN = 15.0  # the seed figure: chrome's in-process ThinLTO link took 15 min...
SEED_SERIAL_MIN = (4.0, 5.0)  # ...with 4–5 min of single-threaded work before the first backend


class Bound(enum.Enum):
    """What limits the backend phase."""

    REMOTE_CORES = "remote cores"
    LONGEST_BACKEND = "longest backend"
    PROXY = "proxy"
    STEP_SERVER = "step server"
    CLIENT_CPU = "client CPU"


@dataclass(frozen=True)
class Measured:
    """What the clean local build measured."""

    backend_ms: tuple[int, ...]  # every backend edge that ran the compiler
    link: str  # the largest link (most bitcode modules)
    modules: int
    thin_link_ms: int
    final_link_ms: int
    build_dir: Path
    every_thin_link_ms_per_module: tuple[float, ...] = ()  # every link of that build
    # [partition] the partition edges that ran the compiler, summed per link and divided by its modules, for
    # each link that had any; and the most partitions one link used
    every_partition_ms_per_module: tuple[float, ...] = ()
    partitions: int = 0

    @property
    def largest_thin_link_ms_per_module(self) -> float:
        return self.thin_link_ms / self.modules

    @property
    def thin_link_ms_per_module(self) -> float:
        """The median over every link of the build: the largest link alone carries work of its own (the
        regular-LTO codegen of its split module) that would dominate a straight extrapolation."""
        every = self.every_thin_link_ms_per_module
        return statistics.median(every) if every else self.largest_thin_link_ms_per_module

    @property
    def final_link_ms_per_object(self) -> float:
        return self.final_link_ms / self.modules

    @property
    def partition_ms_per_module(self) -> float:
        """The regular-LTO module's code generation that left the thin link, per module (median of the links
        that had partition edges; 0 without partitions)."""
        every = self.every_partition_ms_per_module
        return statistics.median(every) if every else 0.0


@dataclass(frozen=True)
class ProxyCosts:
    """RESULTS/proxy.json (the proxy benchmark), in ms."""

    client_cpu_ms_per_hit: float
    client_cpu_ms_per_action: float
    proxy_cpu_ms_per_action: float
    server_round_trip_ms_p50: float
    server_cpu_ms_per_action: float
    remote_overhead_ms_per_action: float
    # [lean] of client_cpu_ms_per_action, the build directory's step server's share: one process (GIL)
    step_server_cpu_ms_per_action: float = 0.0
    # [scale] the busiest shard's share of the proxies' CPU × shards in the benchmark (1: an even spread, or one
    # proxy); printed, not used: its actions were 20 distinct command lines, a build's are all distinct (hashed_spread)
    shard_imbalance: float = 1.0


@dataclass(frozen=True)
class Shape:
    """The modelled build (assumptions 1 and 5)."""

    product_modules: int = 35_000
    test_backends: int = 5_000
    build_cores: int = 32
    proxy_shards: int = 16  # `auto` on 32 cores (goma_ext.remote.proxy_protocol.default_shards)
    step_servers: int = 8  # `auto` on 32 cores (gn_thinlto.steps.step_args.default_servers)

    @property
    def backend_jobs(self) -> int:
        return self.product_modules + self.test_backends


@dataclass(frozen=True)
class Inputs:
    measured: Measured
    costs: ProxyCosts
    costs_source: Path
    shape: Shape


@dataclass(frozen=True)
class BackendPhase:
    makespan_ms: float  # list scheduling on the remote cores
    bounds_ms: tuple[tuple[Bound, float], ...]  # lower bounds, largest first

    @property
    def wall_ms(self) -> float:
        return max(self.makespan_ms, *(ms for _, ms in self.bounds_ms))

    def bound_ms(self, bound: Bound) -> float:
        return dict(self.bounds_ms)[bound]


@dataclass(frozen=True)
class Prediction:
    factor: float
    cores: int
    thin_link_ms: float
    backends: BackendPhase
    final_link_ms: float
    partition_job_ms: float = 0.0  # each of the product link's partition edges (in the backend phase)

    @property
    def wall_ms(self) -> float:
        return self.thin_link_ms + self.backends.wall_ms + self.final_link_ms

    @property
    def serial_fraction(self) -> float:
        return (self.thin_link_ms + self.final_link_ms) / self.wall_ms if self.wall_ms else 0.0


# -- the model (pure) --------------------------------------------------------------------------------------------

def lpt_makespan(durations_ms: Sequence[float], cores: int) -> float:
    """List scheduling, largest job first, each to the core that frees first: when the last core finishes."""
    finish = [0.0] * min(cores, len(durations_ms))
    for d in sorted(durations_ms, reverse=True):
        heapq.heapreplace(finish, finish[0] + d)
    return max(finish, default=0.0)


def sample_jobs(measured_ms: Sequence[int], n: int, seed: int) -> list[float]:
    """N compile times drawn with replacement from MEASURED_MS (deterministic for a seed)."""
    return [float(ms) for ms in random.Random(seed).choices(measured_ms, k=n)]


@functools.lru_cache(maxsize=64)
def hashed_spread(jobs: int, shards: int) -> float:
    """The busiest shard's share × SHARDS when JOBS distinct backend command lines go to the shard the client picks
    for each (proxy_protocol.shard_of): 1.0 is an even spread."""
    if shards <= 1 or jobs <= 0:
        return 1.0
    counts = Counter(wire.shard_of(["clang++", "-c", f"obj/module{i}.o.thinlto.bc", "-o", f"obj/module{i}.o"], shards)
                     for i in range(jobs))
    return max(counts.values()) * shards / jobs


def backend_phase(jobs_ms: Sequence[float], cores: int, costs: ProxyCosts, shape: Shape) -> BackendPhase:
    """The backend phase of JOBS_MS (each job's slot time, overhead included) on CORES remote cores."""
    n = len(jobs_ms)
    shards, servers = min(shape.proxy_shards, shape.build_cores), min(shape.step_servers, shape.build_cores)
    imbalance = hashed_spread(n, shards)
    bounds = {Bound.REMOTE_CORES: sum(jobs_ms) / cores, Bound.LONGEST_BACKEND: max(jobs_ms, default=0.0),
              Bound.PROXY: n * costs.proxy_cpu_ms_per_action * imbalance / shards,
              Bound.STEP_SERVER: n * costs.step_server_cpu_ms_per_action / servers,
              Bound.CLIENT_CPU: n * (costs.client_cpu_ms_per_action + costs.proxy_cpu_ms_per_action)
              / shape.build_cores}
    ranked = tuple(sorted(bounds.items(), key=lambda kv: -kv[1]))
    return BackendPhase(lpt_makespan(jobs_ms, cores), ranked)


def predict(inputs: Inputs, sample_ms: Sequence[float], cores: int, factor: float) -> Prediction:
    """The LTO part of the modelled build: serial thin link, backends on CORES remote cores, serial final link."""
    m, shape, overhead = inputs.measured, inputs.shape, inputs.costs.remote_overhead_ms_per_action
    jobs = [ms * factor + overhead for ms in sample_ms]
    partition_ms = 0.0
    if m.partitions and m.partition_ms_per_module:
        partition_ms = m.partition_ms_per_module * shape.product_modules / m.partitions
        jobs += [partition_ms + overhead] * m.partitions
    return Prediction(factor, cores, m.thin_link_ms_per_module * shape.product_modules,
                      backend_phase(jobs, cores, inputs.costs, shape),
                      m.final_link_ms_per_object * shape.product_modules, partition_ms)


def assumptions(shape: Shape, factors: Sequence[float]) -> list[str]:
    return [
        f"one product link of {shape.product_modules:,} bitcode modules (serial thin link) + ~300 test binaries in "
        f"shared null-index mode = {shape.test_backends:,} more distinct backend jobs ({shape.backend_jobs:,} in all)",
        f"backend compile time: drawn from the measured distribution × {' and × '.join(f'{f:g}' for f in factors)} "
        "(Chromium's translation units are larger than ninja's)",
        "thin link = per-module cost (median of the build's links) × product modules; final link = per-object cost "
        "× product modules; both serial, not scaled by the factor",
        "partition edges (a build with lto_partitions): the product's regular-LTO code generation = per-module "
        "cost (median of the links that had partition edges) × product modules, in as many jobs as the most "
        "partitions a link used, each in the backend phase with the remote overhead, not scaled by the factor",
        "every backend starts after the thin link; ninja -j = remote cores; a job holds its slot for compile time "
        "+ remote overhead; largest first; no action-cache hits, queueing or upload limits",
        f"build machine: {shape.build_cores} cores; client bound = jobs × (client + proxy CPU/action) / cores",
        f"proxy: {shape.proxy_shards} shard(s), each one process (GIL): bound = jobs × proxy CPU/action × shard "
        f"imbalance / shards (the busiest shard's share when the jobs' distinct command lines are hashed over the "
        f"shards as the client hashes them); the build directory's {shape.step_servers} step server(s) likewise: "
        "bound = jobs × their CPU/action / step servers",
        "backend phase = max(makespan, proxy bound, step-server bound, client bound); dominant = largest of remote "
        "cores (work / cores), longest backend, proxy, step server, client CPU",
        "not modelled: bitcode compiles, the test binaries' final links, the REAPI server's capacity",
    ]


# -- measurement and I/O ---------------------------------------------------------------------------------------

def build_fresh(cache: Path, name: str = "abseil", partitions: str = "") -> Path:
    """A clean local build of our graph of subject NAME in CACHE/scale-model/out-NAME[-partitions-P] (checked by
    its tests); PARTITIONS: its lto_partitions (`off` or a number; "": the default, auto)."""
    subject = subjects.SUBJECTS[name](cache)
    out = cache / "scale-model" / (f"out-{name}-partitions-{partitions}" if partitions else f"out-{name}")
    remove(out)
    out.parent.mkdir(parents=True, exist_ok=True)  # the config file goes beside OUT
    progress(f"building {name} with our graph in {out} (minutes)")
    variant = variants.Variant.NO_PARTITIONS if partitions == "off" else variants.Variant.GRAPH
    variants.configure(variant, out, subject.root, subject.gn_args,
                       partitions=int(partitions) if partitions.isdigit() else 0)
    run(["ninja", "-C", str(out), f"-j{os.cpu_count() or 1}"])
    progress(f"  {subjects.check(subject, out)}")
    return out


def measure(out: Path) -> Measured:
    """Backend compile times, and the largest link's thin and final link, from OUT's last build."""
    try:
        edges, backend_log = build_log.read_build(out)
        links = build_log.read_links(out)
    except (GnThinltoError, OSError, ValueError, KeyError) as e:
        raise BenchError(f"{out}: cannot read its last build: {e}") from e
    if not links:
        raise BenchError(f"{out}: no thin-link manifests (gn-thinlto/**/thinlink.json): not a gn-thinlto build")
    largest = max(links, key=lambda link: (link.bitcode_objects, link.binary))
    index, verdicts = build_log.PhaseIndex(links), build_log.cache_verdicts(backend_log)
    backend_ms: list[int] = []
    link_ms: dict[tuple[str, str], int] = {}  # (phase, binary) -> ms
    partition_edges: dict[str, list[int]] = {}  # binary -> its partition edges that ran the compiler
    for edge in edges:
        phase, binary = index.phase_of(edge)
        if phase == "backend" and verdicts.get(edge.outputs[0]) == CacheEvent.MISS:
            if f"/{PARTITION_DIR}/" in edge.outputs[0]:  # a partition edge: the link's regular-LTO codegen
                partition_edges.setdefault(binary, []).append(edge.end_ms - edge.start_ms)
                continue
            backend_ms.append(edge.end_ms - edge.start_ms)
        elif phase in ("thin link", "final link"):
            link_ms[phase, binary] = link_ms.get((phase, binary), 0) + edge.end_ms - edge.start_ms
    thin, final = link_ms.get(("thin link", largest.binary)), link_ms.get(("final link", largest.binary))
    if not backend_ms or not thin or not final or not largest.bitcode_objects:
        raise BenchError(f"{out}: its last build ran no compiling backend, or not {largest.binary}'s thin and final "
                         "link: pass the directory of a clean build")
    every = sorted(link_ms[("thin link", link.binary)] / link.bitcode_objects for link in links
                   if link.bitcode_objects and ("thin link", link.binary) in link_ms)
    split = sorted(sum(partition_edges[link.binary]) / link.bitcode_objects for link in links
                   if link.bitcode_objects and link.binary in partition_edges)
    return Measured(tuple(backend_ms), largest.binary, largest.bitcode_objects, thin, final, out, tuple(every),
                    tuple(split), max((len(ms) for ms in partition_edges.values()), default=0))


def load_costs(results_dir: Path, fallback: Path | None) -> tuple[ProxyCosts, Path]:
    """RESULTS/proxy.json, or FALLBACK when it is missing, with RESULTS/proxy-shards.json's clean-mix figures over
    it when that file is there; one-line errors for a missing file or a bad field."""
    path = results_dir / f"{PROXY_RESULTS}.json"
    if not path.is_file():
        if fallback is None:
            raise BenchError(f"{path}: no such file (the proxy benchmark writes it); or pass --proxy-costs FILE")
        path = fallback
    try:
        data = json.loads(path.read_text())
        costs = ProxyCosts(**{f.name: float(data[f.name]) for f in fields(ProxyCosts)
                              if f.name in data or f.default is MISSING})
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise BenchError(f"{path}: not a proxy-costs file ({type(e).__name__}: {e})") from e
    shards_path = results_dir / f"{SHARD_RESULTS}.json"
    if not shards_path.is_file():
        return costs, path
    try:
        data = json.loads(shards_path.read_text())
        clean = data["costs"][f"clean-{int(data['shards'])}"]
        # net_: without the background the benchmark's idle processes spent over its wall time (a 400-action run on
        # a two-core cluster lasts a minute; 40,000 actions spread it thin); results from before it have none
        net = "net_" if "net_proxy_cpu_ms_per_action" in clean else ""
        total = float(clean[f"{net}proxy_cpu_ms_per_action"])
        busiest = float(clean[f"{net}busiest_shard_cpu_ms_per_action"])
        what = "net of the idle background, " if net else ""
        return replace(costs, proxy_cpu_ms_per_action=total,
                       shard_imbalance=busiest * int(clean["shards"]) / total if total else 1.0,
                       step_server_cpu_ms_per_action=float(clean[f"{net}step_server_cpu_ms_per_action"]),
                       client_cpu_ms_per_action=float(clean[f"{net}client_cpu_ms_per_action"])), Path(
            f"{path}, with the clean mix of {shards_path} ({what}{clean['shards']} shards) for the proxy, shard "
            "imbalance, step server and client")
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise BenchError(f"{shards_path}: not a proxy-shards result ({type(e).__name__}: {e})") from e


def describe_inputs(inputs: Inputs) -> list[str]:
    m, c, log = inputs.measured, inputs.costs, inputs.measured.build_dir / ".ninja_log"
    every = m.every_thin_link_ms_per_module
    q = statistics.quantiles(m.backend_ms, n=10) if len(m.backend_ms) > 1 else [float(m.backend_ms[0])] * 9
    used = {"client_cpu_ms_per_action": "client bound", "proxy_cpu_ms_per_action": "proxy and client bounds",
            "step_server_cpu_ms_per_action": "step-server bound",
            "shard_imbalance": "printed, not used: 20 distinct command lines; the proxy bound hashes the jobs'",
            "remote_overhead_ms_per_action": "added to every job"}
    return [
        f"backend compile time: {len(m.backend_ms)} jobs, p10 {q[0]:.0f} / p50 {q[4]:.0f} / p90 {q[8]:.0f} / max "
        f"{max(m.backend_ms)} ms, mean {statistics.mean(m.backend_ms):.0f} ms — {log}, last build, backend "
        "edges the backend log marks 'miss' (compiler runs)",
        f"thin link per bitcode module: {m.thin_link_ms_per_module:.2f} ms, the median of the {len(every)} links of "
        f"that build ({min(every, default=0):.1f}–{max(every, default=0):.1f} ms per module; the largest, {m.link}: "
        f"{m.thin_link_ms} ms / {m.modules} modules = {m.largest_thin_link_ms_per_module:.2f}) — {log} and the "
        "links' thinlink.json",
        f"final link per native object: {m.final_link_ms_per_object:.2f} ms = {m.link}'s final link "
        f"{m.final_link_ms} ms / {m.modules} objects — {log}",
        (f"partition edges (regular-LTO code generation) per bitcode module: {m.partition_ms_per_module:.2f} ms, "
         f"the median of the {len(m.every_partition_ms_per_module)} links that had any, at most {m.partitions} per "
         f"link — {log}, partition edges the backend log marks 'miss'" if m.partitions else
         "partition edges: none (the thin link compiles each regular-LTO module)"),
        *(f"{f.name}: {getattr(c, f.name):g}{'' if f.name == 'shard_imbalance' else ' ms'} — {inputs.costs_source}"
          f" ({used.get(f.name, 'printed, not used')})" for f in fields(ProxyCosts)),
    ]


def table_row(p: Prediction) -> list[Any]:
    b = p.backends
    return [f"{p.factor:g}×", p.cores, p.thin_link_ms / 1000, p.partition_job_ms / 1000, b.wall_ms / 1000,
            p.final_link_ms / 1000,
            p.wall_ms / 1000, p.wall_ms / 60_000, p.serial_fraction,
            *(b.bound_ms(x) / 1000 for x in Bound), b.bounds_ms[0][0].value, b.bounds_ms[1][0].value]


COLUMNS = ["compile ×", "remote cores", "thin link s", "each partition s", "backends s", "final link s", "LTO wall s",
           "LTO wall min", "serial fraction", *(f"{b.value} bound s" for b in Bound), "dominates backends", "next"]


def seed_comparison(rows: Sequence[Prediction]) -> list[str]:
    lines = [f"seed: chrome's in-process ThinLTO link took {SEED_LINK_MIN:g} min, {SEED_SERIAL_MIN[0]:g}–"
             f"{SEED_SERIAL_MIN[1]:g} min of it single-threaded before the first backend"]
    if rows:
        thin_min = rows[0].thin_link_ms / 60_000
        lines.append(f"model: {thin_min:.1f} min of serial thin link before the first backend "
                     f"({thin_min / SEED_SERIAL_MIN[1]:.1f}–{thin_min / SEED_SERIAL_MIN[0]:.1f}× the seed's), "
                     f"{rows[0].final_link_ms / 60_000:.1f} min of serial final link after the last")
    lines += [f"model: {p.wall_ms / 60_000:.1f} min at {p.cores:,} cores, compile × {p.factor:g} "
              f"({p.wall_ms / 60_000 / SEED_LINK_MIN:.2f} of the seed's {SEED_LINK_MIN:g} min)" for p in rows]
    return lines


def write_plot(curves: Mapping[float, Sequence[Prediction]], path: Path) -> Path | None:
    """Predicted wall vs remote cores, one panel per compile factor: stacked phases, the proxy and client bounds."""
    try:
        import matplotlib
    except ImportError as e:
        print(f"scale-model: no plot ({e.name} not installed: pip install -e .[bench])")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(curves), figsize=(6 * len(curves), 4.2), squeeze=False, sharey=True)
    for ax, (factor, preds) in zip(axes[0], curves.items()):
        xs = [p.cores for p in preds]
        serial = [(p.thin_link_ms + p.final_link_ms) / 60_000 for p in preds]
        ax.stackplot(xs, [p.thin_link_ms / 60_000 for p in preds], [p.final_link_ms / 60_000 for p in preds],
                     [p.backends.wall_ms / 60_000 for p in preds], labels=["thin link", "final link", "backends"],
                     alpha=0.8)
        lines = (("remote cores alone (list scheduling)", "-.", [p.backends.makespan_ms for p in preds]),
                 ("proxy bound", "--", [p.backends.bound_ms(Bound.PROXY) for p in preds]),
                 ("step-server bound", "-.", [p.backends.bound_ms(Bound.STEP_SERVER) for p in preds]),
                 ("client CPU bound", ":", [p.backends.bound_ms(Bound.CLIENT_CPU) for p in preds]))
        for label, style, ms in lines:
            ax.plot(xs, [s + b / 60_000 for s, b in zip(serial, ms)], style, color="black",
                    label=f"serial links + {label}")
        ax.axhline(SEED_LINK_MIN, color="red", linewidth=1, label="seed: in-process link")
        ax.set_xscale("log")
        ax.set_xlabel("remote cores")
        ax.set_title(f"compile time × {factor:g}")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("predicted LTO wall, min")
    axes[0][0].set_ylim(0, 2.5 * max(SEED_LINK_MIN, *(p.wall_ms / 60_000 for ps in curves.values() for p in ps
                                                      if p.cores >= 100)))
    fig.suptitle("Chromium-size ThinLTO link on remote cores (model from measured costs)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path


def curve_cores() -> list[int]:
    """10 … 2,000 remote cores, about 8 points a decade, 100 and 1,000 included."""
    return sorted({round(10 * 10 ** (i / 8)) for i in range(19)} | {2000})


def _partitions(text: str) -> str:
    if text not in ("", "off") and not (text.isdigit() and int(text) > 0):  # "": the default, the config's
        raise argparse.ArgumentTypeError(f"{text!r}: off or a positive number")
    return text


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench scale-model", description=__doc__.splitlines()[0])
    p.add_argument("--build-dir", type=Path, help="a clean gn-thinlto build (default: build --subject's)")
    p.add_argument("--subject", default="abseil", choices=("abseil", "ninja"),
                   help="the code base built when --build-dir is not given (default: abseil, the larger links)")
    p.add_argument("--partitions", default="", type=_partitions,
                   help="lto_partitions of the build it makes: off or a number (default: the config's, auto)")
    p.add_argument("--name", default="scale-model", help="results file name (default: scale-model)")
    p.add_argument("--proxy-costs", type=Path, help="proxy costs JSON, read when RESULTS/proxy.json is missing")
    p.add_argument("--product-modules", type=int, default=Shape.product_modules)
    p.add_argument("--test-backends", type=int, default=Shape.test_backends)
    p.add_argument("--build-cores", type=int, default=Shape.build_cores)
    p.add_argument("--proxy-shards", type=int, help="proxy shards (default: auto on --build-cores, one per 2)")
    p.add_argument("--step-servers", type=int, help="step servers (default: auto on --build-cores, one per 4)")
    p.add_argument("--factors", type=_floats, default=[1.0, 3.0], help="compile-time factors (default: 1,3)")
    p.add_argument("--cores", type=_ints, default=[100, 1000], help="remote cores of the table (default: 100,1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the compile-time sample")
    p.add_argument("--plot", type=Path, default=PLOT)
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    factors, table_cores = args.factors, args.cores
    if min(table_cores) < 1 or args.build_cores < 1 or min(factors) <= 0 or any(
            n is not None and n < 1 for n in (args.proxy_shards, args.step_servers)):
        p.error("cores, build cores, shards, step servers and factors must be positive")
    costs, costs_source = load_costs(args.results, args.proxy_costs)  # before a build of minutes
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    if args.build_dir is None:
        prereqs.ensure()
    out = args.build_dir or build_fresh(args.cache, args.subject, args.partitions)
    shards = args.proxy_shards or wire.default_shards(args.build_cores)
    shape = Shape(args.product_modules, args.test_backends, args.build_cores, shards,
                  args.step_servers or default_servers(args.build_cores))
    inputs = Inputs(measure(out), costs, costs_source, shape)
    sample = sample_jobs(inputs.measured.backend_ms, shape.backend_jobs, args.seed)
    print("inputs:", *(f"  {line}" for line in describe_inputs(inputs)), sep="\n")
    print("assumptions:", *(f"  - {line}" for line in assumptions(shape, factors)), sep="\n")
    rows = [predict(inputs, sample, c, f) for f in factors for c in table_cores]
    print(render(COLUMNS, [table_row(r) for r in rows]))
    print(*seed_comparison(rows), sep="\n")
    curves = {f: [predict(inputs, sample, c, f) for c in curve_cores()] for f in factors}
    plot = write_plot(curves, args.plot)
    if plot:
        print(f"plot: {plot}")
    command = "python -m bench scale-model" + (f" {' '.join(argv)}" if argv else "")
    path = results.write(args.results, args.name, dict(
        ctx, command=command, source=graph_tool.source_state(), inputs=inputs, factors=factors, seed=args.seed,
        assumptions=assumptions(shape, factors), inputs_described=describe_inputs(inputs),
        rows=[dict(zip(COLUMNS, table_row(r))) for r in rows], seed_comparison=seed_comparison(rows),
        curve={f"{f:g}": [[p.cores, p.wall_ms / 1000] for p in ps] for f, ps in curves.items()}))
    print(f"results: {path}")
    return 0
