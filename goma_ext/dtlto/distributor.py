"""Run the backend jobs of one DTLTO link: backend cache first, then remote (REAPI) or local, all in parallel.

Each job goes through the same verified content-addressed cache as gn-thinlto's backend step (its key: the
compiler, the flags without paths, the bitcode and the index contents, so identical backends of other links
and other build directories hit). A miss runs remotely when a server is configured, with the exact input set
decoded from the index, which must agree with the inputs lld listed; any infrastructure fault falls back to
a local compile, with one warning line per distinct reason. Local compiles hold a machine-wide slot (slots).
Outputs reach the paths lld named atomically. A failing compile prints its stderr once; then nothing new
starts, and every output of the link is removed so that lld never sees a partial set.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from goma_ext.bitcode.canonical import canonical_index_digest
from goma_ext.dtlto.jobfile import DistJob, JobFile, check_inputs, remove_outputs
from goma_ext.dtlto.slots import Slots
from goma_ext.errors import GomaExtError
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote import stats
from goma_ext.remote.config import RemoteConfig, explain_failure
from goma_ext.remote.names import COMPILER_CACHE
from thinlto_base.bitcode_blocks import unhashed_modules
from thinlto_base.compile_env import compile_environment
from thinlto_base.fsutil import file_sha256, is_empty_file, read_bytes, remove_if_exists, replace_if_changed
from thinlto_base.keys import BackendJob, cache_key, digest, flag_file_parts
from thinlto_base.safefs import open_nofollow
from thinlto_base.store import CacheStore, fetch_outputs, store_outputs

if TYPE_CHECKING:
    from goma_ext.remote.client import RemoteExecutor, RemoteRun
    from goma_ext.remote.identity import CompilerIdentity
    from goma_ext.remote.proxy_client import ProxyTarget

WARNING = "goma-ext: warning: dtlto:"
KEY_VERSION = b"goma-ext-dtlto-backend-v1"
STAGE = ".goma-ext-dtlto"  # remote actions' index and object, under the content key: the same in every link


class JobFailed(GomaExtError):
    """A backend compile failed (its stderr has been printed)."""


@dataclass(frozen=True)
class Settings:
    remote: RemoteConfig | None
    cache: CacheStore
    cache_policy: str
    slots: Slots
    stats_log: Path | None
    verbose: bool = False


def content_key(job: BackendJob) -> str:
    """What a DTLTO job computes, whatever the link: its flags without paths, its bitcode's content and its
    index's content with module paths left out (lld 22 names extracted archive members after its pid), and the
    contents of the files its flags name (a sample profile lld passes to every job)."""
    return digest([*job.flags_for_key(), file_sha256(job.bitcode), canonical_index_digest(job.index, job.bitcode),
                   *flag_file_parts(job), *_unhashed_module_parts(job)], KEY_VERSION)


def _unhashed_module_parts(job: BackendJob) -> list[str]:
    """The contents of the modules JOB's index names without a module hash (written by opt -module-summary):
    the canonical index digest leaves paths out, so only their files tell two such modules apart."""
    from goma_ext.inputs.backend import archive_of

    unhashed = unhashed_modules(job.index) if job.index else []
    if unhashed is None:
        raise GomaExtError(f"cannot read the module table of the index {job.index}")
    parts = []
    for name in unhashed:
        try:
            parts.append(file_sha256(archive_of(name)))
        except OSError:  # not here to hash: a key of its own, so the job never takes another's object
            parts.append(f"unread:{os.urandom(16).hex()}")
    return parts  # in the index's order: which module has which content


def _dests(job: BackendJob, output: str, dwo: str) -> dict[str, str]:
    return {"o": output, "dwo": dwo} if job.dwo else {"o": output}


class _Remote:
    """Remote execution for the whole link: through the user's `goma-ext proxy` for the endpoint (shared with
    every other link and build), else one in-process REAPI client opened by the first job that needs it. A
    failure to open either makes every job fall back (one warning)."""

    def __init__(self, cfg: RemoteConfig, warn_once: Callable[[str], None], cwd: Path) -> None:
        from goma_ext.remote import proxy_client
        from goma_ext.remote.names import PROXY_ENV, is_off

        self.cfg, self._warn, self._cwd = cfg, warn_once, cwd
        self._lock = threading.Lock()
        self._executor: RemoteExecutor | None = None
        self._down: str | None = None
        use_proxy = not is_off(os.environ.get(PROXY_ENV, "on")) and not cfg.headers  # headers: YAML-only settings
        self._proxy = proxy_client.target_for(cfg, cwd, os.environ) if use_proxy else None

    def executor(self) -> RemoteExecutor | None:
        from goma_ext.remote.client import RemoteExecutor
        from goma_ext.remote.names import TOOLCHAIN_CACHE
        from goma_ext.remote.toolchain import ToolchainCache

        with self._lock:
            if self._executor is None and self._down is None:
                try:
                    self._executor = RemoteExecutor(self.cfg, ToolchainCache(self._cwd / TOOLCHAIN_CACHE))
                except GomaExtError as e:
                    self._down = str(e)
                    self._warn(f"remote execution unavailable, compiling locally: {explain_failure(self.cfg, str(e))}")
            return self._executor

    def run(self, argv: list[str], inputs: list[str], outputs: list[str],
            compiler: CompilerIdentity) -> RemoteRun | None:
        """Run one job remotely (outputs written under cwd); None when no remote client can be had."""
        from goma_ext.remote.proxy_client import ProxyUnavailable

        proxy = self._proxy
        if proxy is not None:
            try:
                return self._via_proxy(proxy, argv, inputs, outputs, compiler)
            except ProxyUnavailable as e:
                self._warn(f"no proxy ({e}); remote jobs run in this process")
                self._proxy = None
        executor = self.executor()
        return executor.run(argv, self._cwd, inputs, outputs, compiler) if executor is not None else None

    def _via_proxy(self, proxy: ProxyTarget, argv: list[str], inputs: list[str], outputs: list[str],
                   compiler: CompilerIdentity) -> RemoteRun:
        from goma_ext.remote import proxy_client
        from goma_ext.remote import proxy_protocol as wire
        from goma_ext.remote.client import RemoteRun
        from goma_ext.remote.config import carried_settings

        cfg = self.cfg
        env = {"GOMA_EXT_CACHE_SALT": cfg.cache_salt, "GOMA_EXT_EXECUTE_TIMEOUT": str(cfg.execute_timeout_s),
               "GOMA_EXT_QUEUE_TIMEOUT": str(cfg.queue_timeout_s)}
        flags = {"endpoint": cfg.endpoint, "exec_root": str(cfg.exec_root), **carried_settings(cfg)}
        message = wire.run_message(argv, str(self._cwd), (str(compiler.path), compiler.version, compiler.sha256), {},
                                   env, flags, wire.token_hash(cfg.token), files=(inputs, outputs))
        frame = proxy_client.call(proxy, message)
        if frame.get("type") != wire.RESULT:
            raise RemoteError(f"proxy: {frame.get('message', frame.get('type'))}", temporary=True)
        try:
            r = wire.Result(frame)
        except wire.FrameError as e:
            raise RemoteError(f"proxy: {e}", temporary=True) from e
        return RemoteRun(r.exit_code, r.stdout, r.stderr, r.cache_hit, r.bytes_uploaded, r.input_bytes, "", r.phases)

    def close(self) -> None:
        if self._executor is not None:
            self._executor.close()


class Distributor:
    """The jobs of one job file, run with SETTINGS in the link's working directory (this process's, where lld
    started it: the job file's paths are relative to it)."""

    def __init__(self, jobs: JobFile, settings: Settings) -> None:
        self.jobs, self.cwd, self.settings = jobs, Path.cwd(), settings
        self._warned: set[str] = set()
        self._print = threading.Lock()
        self._remote = _Remote(settings.remote, self._warn_once, self.cwd) if settings.remote else None
        self._failed = threading.Event()
        self.records: list[stats.RunRecord] = []

    def _warn_once(self, message: str, kind: str = "") -> None:
        """One warning line per KIND of problem (by default, per message) in this link."""
        with self._print:
            if (kind or message) not in self._warned:
                self._warned.add(kind or message)
                print(f"{WARNING} {message}", file=sys.stderr, flush=True)

    def run(self) -> int:
        check_inputs(self.jobs, self.cwd)
        width = self.settings.remote.jobs if self.settings.remote else self.settings.slots.limit
        try:
            with ThreadPoolExecutor(max_workers=max(1, min(width, len(self.jobs.jobs) or 1))) as pool:
                futures: list[Future[stats.RunRecord]] = [pool.submit(self._job, j) for j in self._largest_first()]
                _done, pending = wait(futures, return_when=FIRST_EXCEPTION)
                if pending:
                    for f in pending:
                        f.cancel()
                    wait(pending)
            errors = [e for f in futures if f.done() and not f.cancelled() and (e := f.exception()) is not None]
        finally:
            if self._remote:
                self._remote.close()
        self._log(self.records)
        if errors:
            remove_outputs(self.jobs.jobs, self.cwd)
            other = [e for e in errors if not isinstance(e, JobFailed)]
            if other:
                raise other[0]
            return 1
        if any(r.mode in (stats.Mode.LOCAL, stats.Mode.FALLBACK, stats.Mode.REMOTE) for r in self.records):
            from thinlto_base.prune import prune_if_due

            if self.settings.cache.root:
                prune_if_due(self.settings.cache.root, self.settings.cache_policy, self.settings.cache.trust)
        return 0

    def _largest_first(self) -> list[DistJob]:
        """The jobs, largest bitcode first, as lld orders its in-process backends: the longest compiles start
        early instead of ending the link alone (lld's job file is in link order)."""
        return sorted(self.jobs.jobs, key=lambda job: (self.cwd / job.module).stat().st_size, reverse=True)

    def _log(self, records: list[stats.RunRecord]) -> None:
        log = self.settings.stats_log
        if log is None:
            return
        try:
            for r in records:
                stats.append(log, r)
        except OSError as e:
            self._warn_once(f"cannot append to {log}: {e.strerror}")

    def _job(self, job: DistJob) -> stats.RunRecord:
        if self._failed.is_set():
            raise JobFailed("another job failed")
        start = time.monotonic()
        try:
            record = self._run_job(job, start)
        except OSError as e:
            self._failed.set()
            raise GomaExtError(f"backend for {job.module}: {e.strerror or e}: {e.filename or ''}") from e
        except BaseException:
            self._failed.set()
            raise
        with self._print:
            self.records.append(record)
        if record.exit_code != 0:
            self._failed.set()
            raise JobFailed(f"{job.output}: exit {record.exit_code}")
        return record

    def _run_job(self, job: DistJob, start: float) -> stats.RunRecord:
        backend = BackendJob(job.argv, job.module, job.index, job.output)
        dests = _dests(backend, job.output, backend.dwo)
        keep = set(job.outputs) <= set(dests.values()) and backend.cacheable()
        store = self.settings.cache if keep else CacheStore("")
        # the keys cost a decode of the index: only for the cache and for remote staging
        content = content_key(backend) if store.root or self._remote else ""
        key = cache_key(backend, content) if store.root else ""
        if store.root and fetch_outputs(store, key, {k: str(self.cwd / p) for k, p in dests.items()}):
            return self._record(job, stats.Mode.BACKEND_CACHE, 0, start)
        with store.miss_lock(key) as served:  # the same backend in a concurrent link compiles once
            if served and fetch_outputs(store, key, {k: str(self.cwd / p) for k, p in dests.items()}):
                return self._record(job, stats.Mode.BACKEND_CACHE, 0, start)
            remote = self._remote is not None and not backend.dwo_name
            if self._remote is not None and backend.dwo_name:  # its .dwo (or its own name) would not come back
                self._warn_once("split DWARF backends compile locally: a remote job brings no .dwo file back and "
                                "names its staging path", kind="remote:split-dwarf")
            record = self._remote_job(job, backend, content, start) if remote else None
            if record is None:
                record = self._local_job(job, backend, start)
            if record.exit_code == 0 and store.root:
                outputs = {k: read_bytes(self.cwd / p) for k, p in dests.items()}
                store_outputs(store, key, outputs)
        return record

    def _record(self, job: DistJob, mode: stats.Mode, code: int, start: float, **extra: object) -> stats.RunRecord:
        return stats.RunRecord(job.output, mode, code, time.monotonic() - start, **extra)  # type: ignore[arg-type]

    def _failed_output(self, job: DistJob, where: str, stderr: bytes, code: int) -> None:
        with self._print:
            sys.stderr.write(f"goma-ext: dtlto: backend for {job.module} failed ({where}, exit {code}):\n")
            sys.stderr.flush()
            sys.stderr.buffer.write(stderr)
            sys.stderr.flush()

    def _remote_job(self, job: DistJob, backend: BackendJob, content: str, start: float) -> stats.RunRecord | None:
        """The job run remotely; None when it has to run locally instead (an infrastructure fault).

        lld names a job's index and native object after its pid, so the action reads its index from and writes
        its object to paths named by the job's content key instead (STAGE/<key>/): the same backend in another
        link or build directory is then the same REAPI action, served by the action cache. Modules lld
        extracted from archives (pid-named files) are staged there too under their content's name, and the
        staged index names them so (stage_members).
        """
        import fcntl

        from goma_ext.dtlto.inputs import remote_inputs, stage_members
        from goma_ext.inputs.backend import MachineDependent
        from goma_ext.remote.identity import identify_cached

        assert self._remote is not None
        try:  # a disagreement with lld is an error, not a fallback
            inputs = remote_inputs(self.jobs, job, self.cwd)
        except MachineDependent as e:
            self._warn_once(str(e), kind="remote:machine")
            return None
        stage = os.path.join(STAGE, content)
        os.makedirs(self.cwd / stage, exist_ok=True)
        index, native = os.path.join(stage, "index.thinlto.bc"), os.path.join(stage, "native.o")
        lock = open_nofollow(str(self.cwd / stage / ".lock"), os.O_RDONLY | os.O_CREAT)
        with os.fdopen(lock, "rb"):
            fcntl.flock(lock, fcntl.LOCK_EX)  # the same backend of a concurrent link waits
            renames: dict[str, str] = {}
            try:
                renames = stage_members(self.cwd, job.index, index, stage)
                argv = [renames.get(a, a) for a in backend.relocated(index, native)]
                staged_inputs = [index if p == job.index else renames.get(p, p) for p in inputs]
                compiler = identify_cached(job.argv[0], self.cwd, self.cwd / COMPILER_CACHE)
                got = self._remote.run(argv, staged_inputs, [native], compiler)
                if got is None:
                    return None
                res = got
                if res.exit_code == 0 and is_empty_file(self.cwd / native):  # clang's backend errors exit 0
                    self._warn_once(f"a remote backend exited 0 with an empty object ({job.output}); compiling it "
                                    "locally", kind="remote:empty")
                    return None
                if res.exit_code == 0:
                    os.replace(self.cwd / native, self.cwd / job.output)
            except GomaExtError as e:
                code = getattr(e, "code", None) or type(e).__name__
                why = explain_failure(self._remote.cfg, str(e))
                self._warn_once(f"remote execution failed, compiling locally: {why}", kind=f"remote:{code}")
                return None
            finally:
                for path in (index, native, *renames.values()):
                    remove_if_exists(self.cwd / path)
        if res.exit_code < 0 or res.exit_code >= 128:
            self._warn_once(f"remote compiler died (exit {res.exit_code}), compiling locally")
            return None
        if res.exit_code != 0:
            self._failed_output(job, "remote", res.stderr, res.exit_code)
        elif res.stderr:
            with self._print:
                sys.stderr.buffer.write(res.stderr)
                sys.stderr.flush()
        mode = stats.Mode.CACHE_HIT if res.cache_hit else stats.Mode.REMOTE
        return self._record(job, mode, res.exit_code, start, bytes_uploaded=res.bytes_uploaded,
                            input_bytes=res.input_bytes, phases=res.phases)

    def _local_job(self, job: DistJob, backend: BackendJob, start: float) -> stats.RunRecord:
        """Compile to temporary names beside the outputs, then rename them to the names lld gave."""
        out = self.cwd / job.output
        tmp = out.with_name(f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp_dwo = Path(f"{tmp}.dwo")
        argv = list(backend.argv)
        argv[len(argv) - argv[::-1].index("-o")] = str(tmp)  # the job's own -o, the last one
        mode = stats.Mode.FALLBACK if self._remote else stats.Mode.LOCAL
        t = time.monotonic()
        with self.settings.slots.take():
            try:
                proc = subprocess.run([*argv, *backend.split_dwarf_args(str(tmp_dwo))], cwd=self.cwd,
                                      capture_output=True, check=False, env=compile_environment())
            except OSError as e:
                raise GomaExtError(f"cannot run {argv[0]}: {e.strerror}") from e
        code = proc.returncode
        written = {job.output: tmp, **({backend.dwo: tmp_dwo} if backend.dwo else {})}
        missing = [name for name, path in written.items() if code == 0 and not path.is_file()]
        if missing:
            code = 1
            proc.stderr += f"{argv[0]} exited 0 but did not write {', '.join(missing)}\n".encode()
        elif code == 0 and is_empty_file(tmp):  # clang's ThinLTO backend reports some errors on stderr only
            code = 1
            proc.stderr += f"{argv[0]} exited 0 but wrote an empty object for {job.output}\n".encode()
        if code != 0:
            remove_if_exists(tmp)
            remove_if_exists(tmp_dwo)
            self._failed_output(job, "local", proc.stdout + proc.stderr, code)
        else:
            if proc.stdout or proc.stderr:
                with self._print:
                    sys.stderr.buffer.write(proc.stdout + proc.stderr)
                    sys.stderr.flush()
            if backend.dwo:
                replace_if_changed(tmp_dwo, self.cwd / backend.dwo)
            replace_if_changed(tmp, out)
        return self._record(job, mode, code, start, phases={"local": time.monotonic() - t})
