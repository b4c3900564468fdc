"""The backend build step (`python -m gn_thinlto.backend --cache DIR --log LOG [--launcher] -- [LAUNCHER… --] CLANG …`).

A job whose key (see backend_cache) is cached is not run again: the cached native object is copied into
place. The output is only rewritten when its content changes (the edge has restat = 1). With --launcher, a
miss runs `LAUNCHER… -- CLANG …` (the REAPI wrapper, goma-ext run) with the real output path, so the remote
action is the same on every machine; the wrapper itself replaces the output atomically and only on change.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from gn_thinlto.backend_cache import BackendCache, BackendJob, CacheEvent, cache_key, content_key, record
from gn_thinlto.fsutil import replace_if_changed, write_if_changed

REMOTE_STAGE = Path("gn-thinlto/remote-stage")  # relative to the build directory, the same everywhere


def run(job: BackendJob, cache: BackendCache, log: Path, launcher: Sequence[str] = ()) -> int:
    content = content_key(job)  # hashes the bitcode and index once, for both keys
    key = cache_key(job, content)
    out = Path(job.output)
    if cache.fetch(key, out):
        record(log, CacheEvent.HIT, key, job.output)
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    if launcher:
        return run_launched(job, key, content, cache, log, launcher)
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


def run_launched(
    job: BackendJob, key: str, content: str, cache: BackendCache, log: Path, launcher: Sequence[str]
) -> int:
    """A miss through the launcher (remote execution), run under paths named by the job's content key.

    Identical backends of different binaries differ only in their index and output paths; staged at
    REMOTE_STAGE/<content key>/ they are one REAPI action in every build directory and on every machine, so a
    fresh build directory is served from the action cache whichever of them ninja happens to start first.
    A per-key lock makes a concurrent identical job wait, then take the result from the local cache.
    """
    stage = REMOTE_STAGE / content
    stage.mkdir(parents=True, exist_ok=True)
    out = Path(job.output)
    with open(stage / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if cache.fetch(key, out):
            record(log, CacheEvent.HIT, key, job.output)
            return 0
        index, native = stage / "index.thinlto.bc", stage / "native.o"
        if job.index:
            shutil.copyfile(job.index, index)
        try:
            rc = subprocess.run([*launcher, *job.relocated(str(index), str(native))]).returncode
            if rc != 0:
                return rc
            data = native.read_bytes()
            cache.store(key, data)
            write_if_changed(out, data)
        finally:
            index.unlink(missing_ok=True)
            native.unlink(missing_ok=True)
    record(log, CacheEvent.MISS, key, job.output)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m gn_thinlto.backend")
    p.add_argument("--cache", type=Path, required=True)
    p.add_argument("--log", type=Path, required=True)
    p.add_argument("--launcher", action="store_true", help="the command starts with a launcher ending in `--`")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    launcher: list[str] = []
    if args.launcher:
        if "--" not in command:
            print("gn-thinlto: error: backend: --launcher given but the launcher has no closing `--`", file=sys.stderr)
            return 2
        split = command.index("--") + 1
        launcher, command = command[:split], command[split:]
    try:
        job = BackendJob.parse(command)
        return run(job, BackendCache(args.cache), args.log, launcher)
    except (ValueError, OSError) as e:
        print(f"gn-thinlto: error: backend: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
