"""The worker's own steps around each remote backend of the example, with the toolchain as inputs ([harden]): what
the checks [harden] added cost per action, side by side with the whole lease, in the same run.

Each backend command becomes the Action goma-ext's client would send (`prepare_action`, the toolchain of clang-19
and its libraries in the input root), served from an in-memory CAS to the worker's own `execute_lease` with a warm
file cache and the bubblewrap sandbox (as the runner uid `nobody` when run as root, as a root worker does). The
phases are timed by wrapping the worker's functions: the new checks (each Directory's names, the expanded tree's
size, every input symlink resolved as the kernel would), the no-follow hand-over, the descriptor-relative output
collection, and, for scale, materialising and the sandboxed run.
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.measure import progress

PHASES = ("lease", "materialise", "checks", "hand_over", "run", "collect")
LABELS = {
    "lease": "whole lease (execute_lease)",
    "materialise": "materialise the input root (checks included)",
    "checks": "new checks: names, expanded size, links as the kernel resolves them",
    "hand_over": "hand-over through no-follow descriptors",
    "run": "the sandboxed backend",
    "collect": "collect outputs through no-follow descriptors",
}


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    actions: int
    median_ms: float
    mean_ms: float
    share_of_lease: float  # mean phase / mean lease


class _SourceCas:
    """What execute_lease reads and writes, from the blobs' own sources (files read when asked for: the toolchain,
    which every action carries, is held once, on disk), shared by every lease."""

    def __init__(self) -> None:
        self.sources: dict[Any, Any] = {}

    def read(self, d: Any) -> bytes:
        return bytes(self.sources[d].read())

    def read_many(self, ds: Any) -> dict[Any, bytes]:
        return {d: self.read(d) for d in ds}

    def upload(self, blobs: dict[Any, Any]) -> int:
        return len(blobs)  # outputs and streams: not kept


@contextmanager
def _timed(spent: dict[str, float]) -> Iterator[None]:
    """Wrap the worker's functions so each call adds its time to spent[phase]."""
    from goma_ext.worker import exec_root, inputtree, lease, sandbox

    targets = [(inputtree, "_check_names", "checks"), (inputtree, "measure", "checks"),
               (exec_root, "resolve_link", "checks"), (exec_root, "materialise", "materialise"),
               (lease, "_hand_over", "hand_over"), (sandbox, "run", "run"), (exec_root, "collect_outputs", "collect")]
    saved = [(mod, name, getattr(mod, name)) for mod, name, _ in targets]

    def wrap(fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kw)
            finally:
                spent[phase] += time.perf_counter() - t
        return timed

    try:
        for mod, name, phase in targets:
            setattr(mod, name, wrap(getattr(mod, name), phase))
        yield
    finally:
        for mod, name, fn in saved:
            setattr(mod, name, fn)


def _prepared(out: Path, cmds: Sequence[list[str]]) -> tuple[_SourceCas, list[Any]]:
    from goma_ext.remote.action_inputs import action_files
    from goma_ext.remote.client import prepare_action
    from goma_ext.remote.config import RemoteConfig
    from goma_ext.remote.identity import identify
    from goma_ext.remote.toolchain import ToolchainCache

    cfg = RemoteConfig(endpoint="grpc://127.0.0.1:1", exec_root=out)
    cache = ToolchainCache()
    cas = _SourceCas()
    actions = []
    compilers: dict[str, Any] = {}
    for argv in cmds:
        compiler = compilers.get(argv[0]) or compilers.setdefault(argv[0], identify(argv[0], out))
        toolchain = cache.get(compiler.path, Path(argv[0]).name, cfg.base_system)
        files = action_files(argv, out)
        prepared = prepare_action(cfg, argv, out, files.inputs, files.outputs, compiler, toolchain=toolchain)
        cas.sources.update(prepared.blobs())
        actions.append(prepared.built.action_digest)
    return cas, actions


def measure(out: Path, cmds: Sequence[list[str]], rounds: int) -> list[PhaseRow]:
    """Per phase, the median and mean ms per action over ROUNDS leases of every backend (the first, which fills
    the file cache, not counted)."""
    from goma_ext.reapi.proto import code_pb2
    from goma_ext.worker.filecache import FileCache
    from goma_ext.worker.lease import execute_lease
    from goma_ext.worker.policy import Allowlist
    from goma_ext.worker.sandbox import Isolation, IsolationMode, Limits, RunAs

    cas, leases = _prepared(out, cmds)
    work = Path(tempfile.mkdtemp(prefix="gx-bench-lease-"))
    os.chmod(work, 0o711)
    run_as = RunAs("nobody", 65534, 65534) if os.geteuid() == 0 else None
    iso = Isolation(IsolationMode.BWRAP, Limits(), run_as)
    per: dict[str, list[float]] = defaultdict(list)
    try:
        cache = FileCache(work / "file-cache")
        scratch = work / "sandboxes"
        scratch.mkdir(mode=0o711)
        for r in range(rounds + 1):
            for digest in leases:
                spent: dict[str, float] = defaultdict(float)
                with _timed(spent):
                    t = time.perf_counter()
                    outcome = execute_lease(cas, digest, Allowlist({}), scratch, iso, file_cache=cache)  # type: ignore[arg-type]
                    spent["lease"] = time.perf_counter() - t
                if outcome.status.code != code_pb2.OK or outcome.result is None or outcome.result.exit_code:
                    raise RuntimeError(f"a backend lease failed: {outcome.status.message}")
                if r:  # round 0 fills the file cache
                    for phase in PHASES:
                        per[phase].append(spent[phase] * 1000)
            progress(f"  lease phases: round {r}/{rounds} ({len(leases)} backends{', warm-up' if not r else ''})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lease_mean = statistics.mean(per["lease"])
    return [PhaseRow(LABELS[p], len(per[p]), statistics.median(per[p]), statistics.mean(per[p]),
                     statistics.mean(per[p]) / lease_mean) for p in PHASES]
