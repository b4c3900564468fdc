"""`goma-ext run -- CMD…`: the compiler wrapper ninja runs for backend edges (remote, else local with one warning)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.remote import stats
from goma_ext.remote.config import DEFAULT_STATS_LOG, RemoteConfig, load_config, section_from_yaml
from goma_ext.remote.errors import RemoteError

WARNING_PREFIX = "goma-ext: warning:"
COMPILER_CACHE = ".goma_ext_compilers.json"  # compiler identities, in the build directory
DOWN_MARKER = ".goma_ext_remote_down"  # written when the server is unreachable; later runs skip remote for a while
DOWN_HOLD_S = 30.0


@dataclass(frozen=True)
class RunRequest:
    """One wrapper invocation: the command, where it runs, and the remote settings (None = local)."""

    argv: tuple[str, ...]
    cwd: Path
    remote: RemoteConfig | None
    naive_rsp: str | None = None
    stats_log: str = DEFAULT_STATS_LOG


def default_launcher() -> tuple[str, ...]:
    """How ninja should start the wrapper: this interpreter running goma_ext.remote.wrapper.

    No PATH set-up and light imports."""
    return (sys.executable, "-m", "goma_ext.remote.wrapper")


def wrap_command(
    argv: Sequence[str],
    cfg: RemoteConfig,
    *,
    naive_rsp: str | None = None,
    launcher: Sequence[str] | None = None,
) -> list[str]:
    """The backend command as ninja should run it: `goma-ext run [settings] -- ARGV`.

    Secrets stay in the environment."""
    cmd = [*(launcher or default_launcher()), "--remote", cfg.endpoint]
    if cfg.instance:
        cmd += ["--instance", cfg.instance]
    if cfg.ca_file is not None:
        cmd += ["--ca-file", str(cfg.ca_file)]
    if cfg.token_file is not None:
        cmd += ["--token-file", str(cfg.token_file)]
    cmd += ["--exec-root", str(cfg.exec_root)]
    if naive_rsp:
        cmd += ["--naive-inputs", naive_rsp]
    return [*cmd, "--", *argv]


def add_parser(commands: argparse._SubParsersAction) -> None:
    _add_arguments(commands.add_parser("run", help="run a ThinLTO backend command remotely (falls back to local)"))


def _add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", type=Path, help="gn_thinlto.yaml whose `remote:` section to use")
    p.add_argument("--remote", help="grpc://HOST:PORT or grpcs://HOST:PORT ('off' runs locally)")
    p.add_argument("--instance", help="REAPI instance name")
    p.add_argument("--ca-file", type=Path, help="CA certificate (PEM) for grpcs://")
    p.add_argument("--token-file", type=Path, help="file holding a bearer token (or set GOMA_EXT_REMOTE_TOKEN)")
    p.add_argument("--exec-root", type=Path, help="root of the input tree, relative to the build directory")
    p.add_argument("--naive-inputs", metavar="RSP", help="response file of every bitcode object of the link (stats)")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND ARGS…")
    p.set_defaults(run=run)


def _config(args: argparse.Namespace, env: Mapping[str, str]) -> RemoteConfig | None:
    section = section_from_yaml(args.config) if args.config else {}
    overrides = {
        "endpoint": args.remote,
        "instance": args.instance,
        "ca_file": args.ca_file,
        "token_file": args.token_file,
        "exec_root": args.exec_root,
    }
    return load_config(section, env, overrides)


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise GomaExtError("run: no command given (usage: goma-ext run [OPTIONS] -- COMMAND ARGS…)")
    req = RunRequest(tuple(argv), Path.cwd(), _config(args, os.environ), args.naive_inputs)
    return execute(req)


def _naive_bytes(rsp: str | None, cwd: Path) -> int | None:
    if not rsp:
        return None
    try:
        names = (cwd / rsp).read_text().split()
        return sum((cwd / n).stat().st_size for n in names)
    except OSError:
        return None


def run_local(argv: Sequence[str], cwd: Path) -> int:
    try:
        return subprocess.run(list(argv), cwd=cwd, check=False).returncode
    except OSError as e:
        raise GomaExtError(f"cannot run {argv[0]}: {e.strerror}") from e


def marked_down(cwd: Path, now: float) -> str | None:
    """The reason remote was marked unreachable in this build directory less than DOWN_HOLD_S ago, if it was."""
    marker = cwd / DOWN_MARKER
    try:
        if now - marker.stat().st_mtime < DOWN_HOLD_S:
            return marker.read_text().strip() or "unreachable"
    except OSError:
        pass
    return None


def mark_down(cwd: Path, reason: str) -> None:
    """Remember (for DOWN_HOLD_S) that the server is unreachable, so the next backends skip the retries."""
    try:
        fd, tmp = tempfile.mkstemp(dir=cwd, prefix=f"{DOWN_MARKER}.")
        with os.fdopen(fd, "w") as f:
            f.write(reason + "\n")
        os.replace(tmp, cwd / DOWN_MARKER)
    except OSError:
        pass


def _remote(req: RunRequest, cfg: RemoteConfig, naive: int | None, start: float) -> stats.RunRecord:
    """Run remotely and relay the result; raises GomaExtError on any infrastructure failure."""
    from goma_ext.remote.client import RemoteExecutor
    from goma_ext.remote.identity import identify_cached
    from goma_ext.remote.inputs import action_files

    down = marked_down(req.cwd, time.time())
    if down is not None:
        raise RemoteError(f"server marked unreachable in the last {DOWN_HOLD_S:.0f} s ({down})", temporary=True)
    files = action_files(req.argv, req.cwd)
    compiler = identify_cached(req.argv[0], req.cwd, req.cwd / COMPILER_CACHE)
    try:
        executor = RemoteExecutor(cfg)
    except RemoteError as e:
        if e.code == "UNAVAILABLE":
            mark_down(req.cwd, str(e))
        raise
    try:
        res = executor.run(req.argv, req.cwd, files.inputs, files.outputs, compiler)
    finally:
        executor.close()
    if res.exit_code < 0 or res.exit_code >= 128:
        raise RemoteError(f"remote compiler died (exit {res.exit_code})", temporary=True)
    sys.stdout.buffer.write(res.stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(res.stderr)
    sys.stderr.flush()
    mode = stats.Mode.CACHE_HIT if res.cache_hit else stats.Mode.REMOTE
    return stats.RunRecord(
        files.outputs[0],
        mode,
        res.exit_code,
        time.monotonic() - start,
        res.bytes_uploaded,
        res.input_bytes,
        naive,
        res.phases,
    )


def _output_of(argv: Sequence[str]) -> str:
    return argv[argv.index("-o") + 1] if "-o" in argv[:-1] else "?"


def execute(req: RunRequest) -> int:
    """Remote first; any infrastructure failure -> one warning line and a local run. Records stats."""
    start = time.monotonic()
    naive = _naive_bytes(req.naive_rsp, req.cwd)
    record: stats.RunRecord | None = None
    reason = "remote not configured"
    if req.remote is not None:
        try:
            record = _remote(req, req.remote, naive, start)
        except GomaExtError as e:
            reason = str(e)
            print(f"{WARNING_PREFIX} remote execution failed, running locally: {reason}", file=sys.stderr, flush=True)
    if record is None:
        t = time.monotonic()
        code = run_local(req.argv, req.cwd)
        mode = stats.Mode.FALLBACK if req.remote is not None else stats.Mode.LOCAL
        record = stats.RunRecord(
            _output_of(req.argv),
            mode,
            code,
            time.monotonic() - start,
            naive_bytes=naive,
            phases={"local": time.monotonic() - t},
            reason=reason,
        )
    log = req.cwd / (req.remote.stats_log if req.remote else req.stats_log)
    try:
        stats.append(log, record)
    except OSError as e:
        print(f"{WARNING_PREFIX} cannot append to {log}: {e.strerror}", file=sys.stderr)
    return record.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m goma_ext.remote.wrapper [OPTIONS] -- CMD…`: the wrapper without the rest of the CLI's imports."""
    parser = argparse.ArgumentParser(prog="goma-ext run", description=__doc__)
    _add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except GomaExtError as e:
        print(f"goma-ext: error: {e}", file=sys.stderr)
        return 2


def remote_pool_depth(cfg: RemoteConfig) -> int:
    """Ninja pool depth for remote backend edges."""
    return cfg.jobs


if __name__ == "__main__":
    sys.exit(main())
