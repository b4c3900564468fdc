"""The backend build step (`python -m gn_thinlto.backend --cache DIR --log LOG -- CLANG …`), run per object.

A job whose key (see backend_cache) is cached is not run again: the cached native object is copied into
place. The output is only rewritten when its content changes (the edge has restat = 1).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gn_thinlto.backend_cache import BackendCache, BackendJob, CacheEvent, cache_key, record
from gn_thinlto.fsutil import replace_if_changed


def run(job: BackendJob, cache: BackendCache, log: Path) -> int:
    key = cache_key(job)
    out = Path(job.output)
    if cache.fetch(key, out):
        record(log, CacheEvent.HIT, key, job.output)
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    argv = list(job.argv)
    argv[argv.index("-o") + 1] = str(tmp)
    proc = subprocess.run(argv)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        return proc.returncode
    cache.store(key, tmp.read_bytes())
    replace_if_changed(tmp, out)
    record(log, CacheEvent.MISS, key, job.output)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gn_thinlto.backend")
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--log", type=Path, required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        job = BackendJob.parse(command)
        return run(job, BackendCache(args.cache), args.log)
    except (ValueError, OSError) as e:
        print(f"gn-thinlto: error: backend: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
