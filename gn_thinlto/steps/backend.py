"""The backend build step (`python -S …/gn_thinlto/backend.py --cache DIR|--no-cache --log LOG [--launcher] -- …`).

The command after `--` is `[LAUNCHER… --] [--cg-opt-level=N] CLANG …` (--cg-opt-level: a two-step backend,
thinlto_cache.keys.BackendJob).

A job whose key (see backend_cache) is cached is not run again: the cached native object is copied into
place. The output is only rewritten when its content changes (the edge has restat = 1). With --launcher, a
miss runs `LAUNCHER… -- CLANG …` (the REAPI wrapper, goma-ext run) with the real output path, so the remote
action is the same on every machine; the wrapper itself replaces the output atomically and only on change.

ninja starts this once per backend edge, so its start-up is part of every backend: the rule runs it as a
script under `python -S` (no site-packages scan), and a cache hit imports only os, sys and hashlib;
subprocess, shutil and fcntl are imported on a miss.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run as a script (see render.step_command)
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# The imports below come after the script-mode path set-up above.
from collections.abc import Sequence

from gn_thinlto.steps.backend_log import CacheEvent, record
from thinlto_cache.fsutil import (
    make_parent,
    read_bytes,
    remove_if_exists,
    replace_if_changed,
    sweep_temporaries,
    write_if_changed,
)
from thinlto_cache.keys import BackendJob, cache_key, content_key
from thinlto_cache.safefs import open_nofollow, read_regular, write_new
from thinlto_cache.store import CacheStore, fetch_outputs, store_outputs
from thinlto_cache.trust import Trust

REMOTE_STAGE = "gn-thinlto/remote-stage"  # relative to the build directory, the same everywhere
USAGE = ("usage: backend.py --cache DIR|--no-cache --log LOG [--policy POLICY] [--trust USER,…] [--launcher] -- "
         "[LAUNCHER… --] [--cg-opt-level=N] CLANG …")


def _dests(job: BackendJob, output: str, dwo: str) -> dict[str, str]:
    return {"o": output, "dwo": dwo} if job.dwo else {"o": output}


def run(job: BackendJob, store: CacheStore, log: str | os.PathLike[str], launcher: Sequence[str] = (),
        policy: str = "") -> int:
    content = content_key(job)  # hashes the bitcode and index once, for both keys
    key = cache_key(job, content)
    if fetch_outputs(store, key, _dests(job, job.output, job.dwo)):
        record(log, CacheEvent.HIT, key, job.output)
        return 0
    make_parent(job.output)
    for path in (job.output, job.dwo):  # what a killed step of this output left (one step per output at a time)
        if path:
            sweep_temporaries(path)
    with store.miss_lock(key) as served:  # a concurrent identical job (another build dir) compiles it once
        if served and fetch_outputs(store, key, _dests(job, job.output, job.dwo)):
            record(log, CacheEvent.HIT, key, job.output)
            return 0
        if launcher:
            rc = run_launched(job, key, content, store, log, launcher)
        else:
            rc = run_local(job, key, store, log)
    if rc == 0 and store.root:
        from thinlto_cache.prune import prune_if_due  # a miss, never a hit, pays for pruning

        prune_if_due(store.root, policy)
    return rc


def run_local(job: BackendJob, key: str, store: CacheStore, log: str | os.PathLike[str]) -> int:
    parent, name = os.path.split(job.output)
    tmp = os.path.join(parent, f".{name}.{os.getpid()}.tmp")
    tmp_dwo = f"{tmp}.dwo"
    argv = list(job.argv)
    argv[argv.index("-o") + 1] = tmp
    rc = run_commands(job, argv, job.split_dwarf_args(tmp_dwo), os.path.join(parent, f".{name}.{os.getpid()}.bc.tmp"))
    if rc != 0:
        remove_if_exists(tmp)
        remove_if_exists(tmp_dwo)
        return rc
    outputs = {kind: read_bytes(path) for kind, path in _dests(job, tmp, tmp_dwo).items()}
    store_outputs(store, key, outputs)
    if job.dwo:
        replace_if_changed(tmp_dwo, job.dwo)
    replace_if_changed(tmp, job.output)
    record(log, CacheEvent.MISS, key, job.output)
    return 0


def run_commands(job: BackendJob, argv: Sequence[str], dwo_args: Sequence[str], module: str,
                 launcher: Sequence[str] = ()) -> int:
    """Run the job's command ARGV (its output and index maybe relocated) through LAUNCHER, with DWO_ARGS; a
    two-step job as its two commands, the optimized module written to MODULE (removed after)."""
    if not job.codegen:
        return launch([*launcher, *argv, *dwo_args])
    optimize, codegen = job.two_steps(argv, module)
    try:
        rc = launch([*launcher, *optimize])
        return rc if rc != 0 else launch([*launcher, *codegen, *dwo_args])
    finally:
        remove_if_exists(module)


def run_launched(
    job: BackendJob, key: str, content: str, store: CacheStore, log: str | os.PathLike[str],
    launcher: Sequence[str],
) -> int:
    """A miss through the launcher (remote execution), run under paths named by the job's content key (a
    two-step job is two remote actions, the second reading the module the first wrote).

    Identical backends of different binaries differ only in their index and output paths; staged at
    REMOTE_STAGE/<content key>/ they are one REAPI action in every build directory and on every machine, so a
    fresh build directory is served from the action cache whichever of them ninja happens to start first.
    A per-key lock makes a concurrent identical job wait, then take the result from the local cache.
    """
    import fcntl

    stage = os.path.join(REMOTE_STAGE, content)
    os.makedirs(stage, exist_ok=True)
    lock = open_nofollow(os.path.join(stage, ".lock"), os.O_RDONLY | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if fetch_outputs(store, key, _dests(job, job.output, job.dwo)):
            record(log, CacheEvent.HIT, key, job.output)
            return 0
        index, native = os.path.join(stage, "index.thinlto.bc"), os.path.join(stage, "native.o")
        dwo, module = os.path.join(stage, "native.dwo"), os.path.join(stage, "optimized.bc")
        for path in (index, native, dwo, module):  # a killed step's leftovers; the launcher writes new ones
            remove_if_exists(path)
        if job.index:
            write_new(index, read_regular(job.index)[0])
        try:
            rc = run_commands(job, job.relocated(index, native), job.split_dwarf_args(dwo), module, launcher)
            if rc != 0:
                return rc
            outputs = {kind: read_bytes(path) for kind, path in _dests(job, native, dwo).items()}
            store_outputs(store, key, outputs)
            for kind, path in _dests(job, job.output, job.dwo).items():
                write_if_changed(path, outputs[kind])
        finally:
            for path in (index, native, dwo):
                remove_if_exists(path)
    finally:
        os.close(lock)
    record(log, CacheEvent.MISS, key, job.output)
    record(log, CacheEvent.REMOTE, content, job.output)  # ties the output to the launcher's record (trace)
    return 0


def launch(argv: list[str]) -> int:
    """Run the launcher command; its exit code.

    A launcher that is a Python script for this interpreter under -S (`python -S SCRIPT …`: goma-ext's thin
    client) runs in this process, as `python SCRIPT` would run it: one interpreter start-up less per remote
    backend, the step's largest remaining cost on an action-cache hit."""
    if len(argv) > 2 and argv[0] == sys.executable and argv[1] == "-S" and argv[2].endswith(".py"):
        import runpy

        saved = sys.argv
        sys.argv = argv[2:]
        try:
            runpy.run_path(argv[2], run_name="__main__")
            return 0
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        finally:
            sys.argv = saved
            sys.stdout.flush()
            sys.stderr.flush()
    import subprocess

    return subprocess.run(argv).returncode


def parse_args(argv: Sequence[str]) -> tuple[str, str, list[str], list[str], str, list[str]]:
    """(cache dir or "" for none, log, launcher argv ending in `--` or empty, command, cache policy, trusted
    writers besides this user and root); ValueError on bad usage.

    Hand-parsed: the arguments come from our own ninja rule, and argparse's import costs more than a hit.
    """
    opts: dict[str, str] = {}
    launched = False
    rest = list(argv)
    while rest and rest[0] != "--":
        flag = rest.pop(0)
        if flag == "--launcher":
            launched = True
        elif flag == "--no-cache":
            opts["--cache"] = ""
        elif flag in ("--cache", "--log", "--policy", "--trust") and rest:
            opts[flag] = rest.pop(0)
        else:
            raise ValueError(f"unexpected argument {flag!r}")
    if "--cache" not in opts or "--log" not in opts:
        raise ValueError("--cache (or --no-cache) and --log are required")
    command = rest[1:]
    launcher: list[str] = []
    if launched:
        if "--" not in command:
            raise ValueError("--launcher given but the launcher has no closing `--`")
        split = command.index("--") + 1
        launcher, command = command[:split], command[split:]
    trust = [w for w in opts.get("--trust", "").split(",") if w]
    return opts["--cache"], opts["--log"], launcher, command, opts.get("--policy", ""), trust


def main(argv: Sequence[str] | None = None) -> int:
    try:
        cache, log, launcher, command, policy, trust = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        print(f"gn-thinlto: error: backend: {e} ({USAGE})", file=sys.stderr)
        return 2
    try:
        job = BackendJob.parse(command)
        store = CacheStore(cache, Trust(trust), warn_dir=os.path.dirname(os.fspath(log)))
        return run(job, store, log, launcher, policy)
    except (ValueError, OSError) as e:
        print(f"gn-thinlto: error: backend: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
