"""The backend build step (`python -S …/gn_thinlto/backend.py --cache DIR|--no-cache --log LOG [--launcher] -- …`).

The command after `--` is `[LAUNCHER… --] [--cg-opt-level=N] CLANG …` (--cg-opt-level: a two-step backend,
thinlto_base.keys.BackendJob).

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
from collections.abc import Callable, Sequence

from gn_thinlto.steps.backend_log import CacheEvent, record
from gn_thinlto.steps.server_start import start_server
from gn_thinlto.steps.step_args import SERVERS_ENV, USAGE, chosen_socket, parse_args
from gn_thinlto.steps.thinlink_paths import PARTITION_BITCODE_SUFFIX
from thinlto_base.fsutil import (
    is_empty_file,
    make_parent,
    read_bytes,
    remove_if_exists,
    remove_named_after,
    replace_if_changed,
    sweep_temporaries,
    write_if_changed,
)
from thinlto_base.keys import BackendJob, cache_key, content_key
from thinlto_base.safefs import copy_fd, create_exclusive, open_nofollow, read_regular, write_new
from thinlto_base.store import CacheStore, fetch_outputs, store_outputs
from thinlto_base.trust import Trust

REMOTE_STAGE = "gn-thinlto/remote-stage"  # relative to the build directory, the same everywhere


def _dests(job: BackendJob, output: str, dwo: str) -> dict[str, str]:
    return {"o": output, "dwo": dwo} if job.dwo else {"o": output}


Runner = Callable[[list[str]], int]  # runs one command, returns its exit status: launch, or the step server's


def _wanted() -> None:
    """The Python step is always wanted: ninja stops it by stopping its process."""


def run(job: BackendJob, store: CacheStore, log: str | os.PathLike[str], launcher: Sequence[str] = (),
        policy: str = "", runner: Runner | None = None) -> int:
    """JOB's outputs in place, from the cache or made by RUNNER (None: `launch`, a child of this process); after
    a miss, the cache pruned when due (POLICY). The exit status."""
    rc, missed = serve(job, store, log, launcher, runner or launch)
    if rc == 0 and missed and store.root:
        prune_due(store, policy)
    return rc


def prune_due(store: CacheStore, policy: str) -> None:
    from thinlto_base.prune import prune_if_due  # a miss, never a hit, pays for pruning

    prune_if_due(store.root, policy, store.trust)


def serve(job: BackendJob, store: CacheStore, log: str | os.PathLike[str], launcher: Sequence[str],
          runner: Runner, wanted: Callable[[], None] = _wanted) -> tuple[int, bool]:
    """(exit status, whether the job missed the cache) of serving JOB: run() without pruning. WANTED raises
    when the step is no longer wanted (the step server's launcher is gone): it is called before each write of
    an output, so a step that ninja stopped never writes one after a new build has."""
    # a partition edge the thin link left unused (steps.partitions): its bitcode (partK.bc) is empty; bitcode
    # objects of null-index backends (X.o) are not stat'ed for it
    if not job.index and job.bitcode.endswith(PARTITION_BITCODE_SUFFIX) and is_empty_file(job.bitcode):
        wanted()
        for path in (job.output, job.dwo):
            if path:
                write_if_changed(path, b"")
        return 0, False
    if not job.cacheable():
        store = CacheStore("")  # its object depends on a program of this machine (-fno-integrated-as): not kept
    content = content_key(job)  # hashes the bitcode and index once, for both keys
    key = cache_key(job, content)
    wanted()
    if fetch_outputs(store, key, _dests(job, job.output, job.dwo)):
        record(log, CacheEvent.HIT, key, job.output)
        return 0, False
    make_parent(job.output)
    for path in (job.output, job.dwo):  # what a killed step of this output left (one step per output at a time)
        if path:
            sweep_temporaries(path)
    with store.miss_lock(key) as served:  # a concurrent identical job (another build dir) compiles it once
        wanted()
        if served and fetch_outputs(store, key, _dests(job, job.output, job.dwo)):
            record(log, CacheEvent.HIT, key, job.output)
            return 0, False
        if launcher:
            return run_launched(job, key, content, store, log, launcher, runner, wanted), True
        return run_local(job, key, store, log, runner, wanted), True


def run_local(job: BackendJob, key: str, store: CacheStore, log: str | os.PathLike[str], runner: Runner,
              wanted: Callable[[], None] = _wanted) -> int:
    parent, name = os.path.split(job.output)
    # `.NAME.PID.TOKEN.tmp`: the pid tells sweep_temporaries whether the writer still runs; the token keeps two
    # steps of one process (the step server's) apart
    tmp = os.path.join(parent, f".{name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    tmp_dwo = f"{tmp}.dwo"
    argv = list(job.argv)
    argv[argv.index("-o") + 1] = tmp
    done = False
    try:
        try:
            rc = run_commands(job, argv, job.split_dwarf_args(tmp_dwo), f"{tmp.removesuffix('.tmp')}.bc.tmp",
                              runner=runner)
        except EmptyOutput:
            rc = _said_empty(job)
        if rc != 0:
            return rc
        outputs = {kind: read_bytes(path) for kind, path in _dests(job, tmp, tmp_dwo).items()}
        if not outputs["o"]:
            return _said_empty(job)
        store_outputs(store, key, outputs)
        wanted()
        if job.dwo:
            replace_if_changed(tmp_dwo, job.dwo)
        replace_if_changed(tmp, job.output)
        done = True
    finally:  # after a failure, or the step server's launcher gone mid-step: every file named after TMP (the
        if not done:  # compiler's own `TMP-XXXXXXXX.tmp` too, when it was killed)
            remove_named_after(tmp.removesuffix(".tmp"))
    record(log, CacheEvent.MISS, key, job.output)
    return 0


def _said_empty(job: BackendJob) -> int:
    print(f"gn-thinlto: error: backend: the compiler exited 0 but wrote an empty object (or module) for "
          f"{job.output}; its errors are above (clang's ThinLTO backend reports some only there)", file=sys.stderr)
    return 1


def run_commands(job: BackendJob, argv: Sequence[str], dwo_args: Sequence[str], module: str,
                 launcher: Sequence[str] = (), runner: Runner | None = None) -> int:
    """Run the job's command ARGV (its output and index maybe relocated) through LAUNCHER, with DWO_ARGS, by
    RUNNER (None: launch); a two-step job as its two commands, the optimized module written to MODULE (removed
    after)."""
    from thinlto_base.compile_env import COMPILE_MARK  # a miss: the import costs nothing on a hit

    runner = runner or launch
    head = list(launcher) or [COMPILE_MARK]  # a compile here runs without what compile_env removes
    if not job.codegen:
        return _explained(runner([*head, *argv, *dwo_args]), launcher)
    optimize, codegen = job.two_steps(argv, module)
    try:
        rc = runner([*head, *optimize])
        if rc == 0 and _nothing_in(module):  # the code generation would make a valid object of an empty module
            raise EmptyOutput(module)
        return _explained(rc if rc != 0 else runner([*head, *codegen, *dwo_args]), launcher)
    finally:
        remove_if_exists(module)


class EmptyOutput(Exception):
    """A compile exited 0 and left an empty file: clang's ThinLTO backend after an error it only prints (an
    imported module it could not load)."""


def _nothing_in(path: str) -> bool:
    """Whether PATH holds no bytes, or is a stand-in (download: minimal) for a blob of none."""
    if is_empty_file(path):
        return True
    from thinlto_base import remote_stub

    stub = remote_stub.read_stub(path)
    return stub is not None and stub.size == 0


def _explained(rc: int, launcher: Sequence[str]) -> int:
    """RC, after saying why a local compile could not start when a variable it runs without explains it."""
    if rc == 127 and not launcher:
        from thinlto_base.compile_env import explain_failure

        note = explain_failure(rc)
        if note:
            print(note, file=sys.stderr)
    return rc


def run_launched(
    job: BackendJob, key: str, content: str, store: CacheStore, log: str | os.PathLike[str],
    launcher: Sequence[str], runner: Runner | None = None, wanted: Callable[[], None] = _wanted,
) -> int:
    """A miss through the launcher (remote execution), run under paths named by the job's content key (a
    two-step job is two remote actions, the second reading the module the first wrote).

    Identical backends of different binaries differ only in their index and output paths; staged at
    REMOTE_STAGE/<content key>/ they are one REAPI action in every build directory and on every machine, so a
    fresh build directory is served from the action cache whichever of them ninja happens to start first.
    A per-key lock makes a concurrent identical job wait, then take the result from the local cache.
    """
    import fcntl

    from thinlto_base import remote_stub

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
            _stage_previous(_dests(job, job.output, job.dwo), _dests(job, native, dwo))
            try:
                rc = run_commands(job, job.relocated(index, native), job.split_dwarf_args(dwo), module, launcher,
                                  runner)
            except EmptyOutput:  # the optimization action's module: code generation would not notice
                rc, empty = 0, True
            else:
                empty = False
            if rc != 0:
                return rc
            outputs = {kind: read_bytes(path) for kind, path in _dests(job, native, dwo).items()} if not empty \
                else {"o": b""}
            kept = {kind: remote_stub.parse(data) for kind, data in outputs.items()}
            if not outputs["o"] or (kept["o"] is not None and kept["o"].size == 0):
                print(f"gn-thinlto: warning: the remote backend for {job.output} exited 0 with an empty object "
                      "(an import it could not load?); compiling it here", file=sys.stderr)
                return run_local(job, key, store, log, runner or launch, wanted)  # an identical job waits, then hits
            # a stand-in (download: minimal) is not stored: only the action cache, which the proxy checks against
            # the CAS, may give one (a local entry would name an evicted object for ever)
            store_outputs(store, key, outputs)
            wanted()
            for kind, path in _dests(job, job.output, job.dwo).items():
                stub = kept[kind]
                if stub is None or not remote_stub.holds(path, stub):  # the object's bytes already here stay
                    write_if_changed(path, outputs[kind])
        finally:
            for path in (index, native, dwo):
                remove_if_exists(path)
    finally:
        os.close(lock)
    record(log, CacheEvent.MISS, key, job.output)
    record(log, CacheEvent.REMOTE, content, job.output)  # ties the output to the launcher's record (trace)
    return 0


def _stage_previous(outputs: dict[str, str], staged: dict[str, str]) -> None:
    """Copy the objects this edge wrote last time (not stand-ins) to where the remote action writes: a backend
    that reruns because its index changed mostly gives the object it gave before, and the remote client then
    finds the bytes in place and does not download them (goma_ext.remote.client.fetch_outputs). A copy, not a
    link: whatever the action writes there never reaches the build's own output. Best effort: a copy that
    fails is removed, and the action writes its own."""
    from thinlto_base import remote_stub

    for kind, path in outputs.items():
        try:
            src = open_nofollow(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            if remote_stub.is_stub_bytes(os.pread(src, remote_stub.MAX_STUB_BYTES + 1, 0)):
                continue
            dst = create_exclusive(staged[kind])
            try:
                copy_fd(src, dst)
            finally:
                os.close(dst)
        except OSError:
            remove_if_exists(staged[kind])
        finally:
            os.close(src)


def launch(argv: list[str]) -> int:
    """Run the launcher command, or (after COMPILE_MARK) the compile without the variables compile_env removes;
    its exit code.

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
    import time

    from thinlto_base.compile_env import COMPILE_MARK, compile_environment

    env = None
    if argv[:1] == [COMPILE_MARK]:
        argv, env = argv[1:], compile_environment()
    start = time.perf_counter()
    try:
        return subprocess.run(argv, env=env).returncode
    finally:
        _child_wall[0] += time.perf_counter() - start


_child_wall = [0.0]  # seconds this step waited for the commands it ran (GN_THINLTO_STEP_ACCOUNTING)
ACCOUNTING_ENV = "GN_THINLTO_STEP_ACCOUNTING"
# (NAME, DEFAULT, MEANING) for docs/reference/environment.md (the step launcher, launcher.c, reads it too).
ENVIRONMENT: tuple[tuple[str, str, str], ...] = (
    (ACCOUNTING_ENV, "", "FILE: each backend step and step launcher appends one line of its wall and CPU times "
                         "(the benchmarks' per-step accounting)"),
    (SERVERS_ENV, "", "set by the step launcher for the Python step behind it: the socket of the step server it "
                      "chose (`step_servers` > 1), which the Python step starts when none answered"),
)


def account(path: str) -> None:
    """Append `python 0 CHILD_WALL_US USER_US SYS_US` to PATH: the benchmarks' per-step accounting (the step
    launcher writes the same line; a step's wall is measured by whoever started it)."""
    times = os.times()
    line = f"python 0 {_child_wall[0] * 1e6:.0f} {times.user * 1e6:.0f} {times.system * 1e6:.0f}\n"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
    except ValueError as e:
        print(f"gn-thinlto: error: backend: {e} ({USAGE})", file=sys.stderr)
        return 2
    if args.socket:  # the step launcher found no server: start one for the next edges (before this step, which
        start_server(args, chosen_socket(args))  # may wait seconds on a remote action)
    try:
        job = BackendJob.parse(args.command)
        store = CacheStore(args.cache, Trust(args.trust), warn_dir=os.path.dirname(os.fspath(args.log)))
        rc = run(job, store, args.log, args.launcher, args.policy)
    except (ValueError, OSError) as e:
        print(f"gn-thinlto: error: backend: {e}", file=sys.stderr)
        return 2
    if os.environ.get(ACCOUNTING_ENV):
        account(os.environ[ACCOUNTING_ENV])
    return rc


if __name__ == "__main__":
    sys.exit(main())
