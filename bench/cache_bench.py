"""`python -m bench cache`: the backend cache's costs — a verified hit against an unverified one, pruning a
100k-entry cache, and two builds of the example sharing one cache concurrently.

(1) Hit cost: the cache's fetch (read the entry, read each blob, SHA-256 it, compare, write the output if it
changed, refresh the use times) against the same reads and write without the hash and the use-time refresh,
on the example's real native objects; and, for scale, one whole backend step's hit (`python -S backend.py`,
what ninja runs). (2) Pruning: N entries with small blobs; a prune that finds nothing to do (the scan) and
one that removes the least recently used tenth. (3) Two ninja builds of the example, in two build dirs with
one absolute cache_dir, started together: compiler runs in both against the distinct backends (keys).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from bench import prereqs, results, subjects
from bench.fsio import remove
from bench.measure import progress, ratio, run
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render
from thinlto_base.fsutil import read_bytes, write_if_changed
from thinlto_base.policy import CachePolicy
from thinlto_base.prune import prune
from thinlto_base.store import CacheStore, fetch_outputs

BACKEND_LOG = "gn-thinlto/backend.log"


def unverified_fetch(store: CacheStore, key: str, dest: str) -> bool:
    """The baseline: the same reads and write as fetch_outputs, without hashing or refreshing use times."""
    entry = store.read_entry(key)
    if entry is None:
        return False
    write_if_changed(dest, read_bytes(store.blob_path(*entry["o"])))
    return True


def _gen(root: Path, out: Path, config: Path | None = None) -> None:
    cmd = [sys.executable, "-m", "gn_thinlto.cli", "gen", str(out), "--root", str(root)]
    run([*cmd, "--config", str(config)] if config else cmd)


def hit_cost(root: Path, work: Path, repeat: int) -> dict[str, object]:
    out = work / "hits"
    if not (out / BACKEND_LOG).is_file():
        _gen(root, out)
        run(["ninja", "-C", str(out)])
    store = CacheStore(out / "gn-thinlto" / "cache")
    keys = sorted(p.name for p in (out / "gn-thinlto/cache/ac").glob("*/*"))
    dest = str(work / "hit.o")
    sizes = [store.read_entry(k)["o"][1] for k in keys]  # type: ignore[index]
    timings: dict[str, list[float]] = {"verified": [], "unverified": []}
    for _ in range(repeat):  # interleaved rounds over every entry
        for name, fetch in (("verified", lambda k: fetch_outputs(store, k, {"o": dest})),
                            ("unverified", lambda k: unverified_fetch(store, k, dest))):
            start = time.perf_counter()
            for k in keys:
                if not fetch(k):
                    raise RuntimeError(f"entry {k} missing")
            timings[name].append((time.perf_counter() - start) / len(keys))
    verified, unverified = sorted(timings["verified"])[repeat // 2], sorted(timings["unverified"])[repeat // 2]
    # one whole backend step's hit, as ninja runs it (process start, key, fetch): the context for the above
    line = next(l for l in (out / BACKEND_LOG).read_text().splitlines() if l.startswith("miss "))
    native = line.split(" ", 2)[2]
    cmd = subprocess.run(["ninja", "-C", str(out), "-t", "commands", "-s", native], capture_output=True,
                         text=True, check=True).stdout.strip().splitlines()[-1]
    steps = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(["sh", "-c", cmd], cwd=out, check=True)
        steps.append(time.perf_counter() - start)
    step = sorted(steps)[repeat // 2]
    return {"entries": len(keys), "mean_object_bytes": sum(sizes) / len(sizes), "verified_us": verified * 1e6,
            "unverified_us": unverified * 1e6, "verified_vs_unverified": ratio(verified, unverified),
            "step_hit_ms": step * 1e3, "verification_share_of_step_hit": ratio(verified - unverified, step)}


def prune_cost(work: Path, entries: int) -> dict[str, object]:
    root = work / f"prune-{entries}"
    store = CacheStore(root)
    if len(list((root / "ac").glob("*/*"))) != entries:
        remove(root)
        progress(f"  writing {entries} entries")
        for i in range(entries):
            key = hashlib.sha256(f"entry {i}".encode()).hexdigest()
            store.store(key, {"o": i.to_bytes(8, "big") * 32})
            os.utime(store.entry_path(key), (1_000_000 + i, 1_000_000 + i))
    files = 2 * entries
    start = time.perf_counter()
    prune(str(root), CachePolicy(0, 0, 0, 0, max_files=files), now=2_000_000)
    scan_s = time.perf_counter() - start
    start = time.perf_counter()
    r = prune(str(root), CachePolicy(0, 0, 0, 0, max_files=files - files // 10), now=2_000_000)
    trim_s = time.perf_counter() - start
    return {"entries": entries, "scan_only_s": scan_s, "trim_tenth_s": trim_s, "entries_removed": r.entries_removed}


def shared_builds(subject: subjects.Subject, work: Path) -> dict[str, object]:
    root = subject.root
    shared = work / "shared-cache"
    remove(shared)
    config = work / "shared.yaml"
    config.write_text(f"cache_dir: {shared}\n")
    outs = [work / f"shared{n}" for n in (1, 2)]
    for out in outs:
        remove(out)
        _gen(root, out, config)
    start = time.perf_counter()
    procs = [subprocess.Popen(["ninja", "-C", str(out)], stdout=subprocess.DEVNULL) for out in outs]
    if any(p.wait() != 0 for p in procs):
        raise RuntimeError("a shared-cache build failed")
    wall = time.perf_counter() - start
    lines = [l.split(" ") for out in outs for l in (out / BACKEND_LOG).read_text().splitlines()]
    runs = sum(1 for l in lines if l[0] == "miss")
    distinct = len({l[1] for l in lines})
    check = [subjects.check(subject, out) for out in outs]
    return {"compiler_runs": runs, "distinct_backends": distinct, "runs_vs_distinct": ratio(runs, distinct),
            "backend_steps": len(lines), "wall_s": wall, "checks": check}


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench cache", description=__doc__.splitlines()[0])
    p.add_argument("--entries", type=int, default=100_000, help="cache size for the prune timing")
    p.add_argument("--repeat", type=int, default=9, help="rounds of the hit timings (medians reported)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    p.add_argument("--name", default="cache")
    p.add_argument("--subject", default="example", choices=("example", "tiny", "micro"), help="the workspace built")
    args = p.parse_args(argv)
    prereqs.ensure()
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    subject = subjects.SUBJECTS[args.subject](args.cache)
    work = args.cache / "cache-bench"
    work.mkdir(parents=True, exist_ok=True)
    progress(f"hit cost ({subject.name})")
    hits = hit_cost(subject.root, work, args.repeat)
    progress(f"prune at {args.entries} entries")
    pruning = prune_cost(work, args.entries)
    progress(f"two {subject.name} builds sharing one cache")
    shared = shared_builds(subject, work)
    print(render(["entries", "object bytes", "verified µs", "unverified µs", "verified / unverified",
                  "step hit ms", "verification / step hit"],
                 [[hits["entries"], hits["mean_object_bytes"], hits["verified_us"], hits["unverified_us"],
                   hits["verified_vs_unverified"], hits["step_hit_ms"], hits["verification_share_of_step_hit"]]]))
    print(render(["entries", "scan s", "trim 10% s", "removed"],
                 [[pruning["entries"], pruning["scan_only_s"], pruning["trim_tenth_s"], pruning["entries_removed"]]]))
    print(render(["compiler runs", "distinct backends", "runs / distinct", "backend steps", "wall s"],
                 [[shared["compiler_runs"], shared["distinct_backends"], shared["runs_vs_distinct"],
                   shared["backend_steps"], shared["wall_s"]]]))
    print("checks: " + "; ".join(shared["checks"]))  # type: ignore[arg-type]
    command = "python -m bench cache" + (f" {' '.join(argv)}" if argv else "")
    path = results.write(args.results, args.name, {**ctx, "command": command, "hits": hits, "prune": pruning,
                                                   "shared": shared})
    print(f"results: {path}")
    return 0
