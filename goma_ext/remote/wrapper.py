"""`goma-ext run -- CMD…`: the compiler wrapper ninja runs for backend edges (remote, else local with one warning).

The full client, behind the thin client ninja runs (thin_client.py, which hands over whatever its fast path
does not handle). It gives the action to the user's long-lived `goma-ext proxy` for the endpoint, starting or
replacing the proxy as needed; without one (none startable, or GOMA_EXT_PROXY=off) it loads site-packages and
runs the action in-process over gRPC, as before the proxy existed. Standard-library imports at module level.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run as a script (see default_launcher)
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# The imports below come after the script-mode path set-up above.
import argparse
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from goma_ext.errors import GomaExtError
from goma_ext.reapi.errors import RemoteError
from goma_ext.remote import proxy_client, records, stats
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.config import (
    MODES,
    RemoteConfig,
    carried_settings,
    download_from_flags,
    explain_failure,
    load_config,
    section_from_yaml,
)
from goma_ext.remote.identity import identify_cached
from goma_ext.remote.names import COMPILER_CACHE, DEFAULT_STATS_LOG, PROXY_ENV, TOOLCHAIN_CACHE, is_off

WARNING_PREFIX = "goma-ext: warning:"
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
    proxy: proxy_client.ProxyTarget | None = None
    settings: ProxySettings | None = None


@dataclass(frozen=True)
class ProxySettings:
    """Where cfg came from, for the proxy to merge the same way: the YAML section and the command-line flags."""

    section: Mapping[str, object]
    flags: Mapping[str, str | None]


def default_launcher() -> tuple[str, ...]:
    """How ninja should start the wrapper: this interpreter running the thin client as a script under `python -S`.

    No PATH set-up, no site-packages scan, standard-library imports only (like the build steps)."""
    return (sys.executable, "-S", os.path.join(os.path.dirname(os.path.realpath(__file__)), "thin_client.py"))


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
    cmd += [arg for key, value in carried_settings(cfg).items() for arg in (f"--{key.replace('_', '-')}", value)]
    cmd += ["--exec-root", str(cfg.exec_root)]
    if naive_rsp:
        cmd += ["--naive-inputs", naive_rsp]
    return [*cmd, "--", *argv]


def link_command(cfg: RemoteConfig) -> list[str]:
    """How the final links' lld shim starts a remote link (`download: minimal`): `remote_link.py [settings] --`,
    lld's arguments to follow."""
    script = os.path.join(os.path.dirname(os.path.realpath(__file__)), "remote_link.py")
    return wrap_command([], cfg, launcher=(sys.executable, "-S", script))


def add_parser(commands: argparse._SubParsersAction) -> None:
    _add_arguments(commands.add_parser("run", help="run a ThinLTO backend command remotely (falls back to local)"))


def add_settings_arguments(p: argparse.ArgumentParser) -> None:
    """The remote settings options, shared with `goma-ext proxy`."""
    p.add_argument("--config", type=Path, help="gn_thinlto.yaml whose `remote:` section to use")
    p.add_argument("--remote", help="grpc://HOST:PORT or grpcs://HOST:PORT ('off' runs locally)")
    p.add_argument("--instance", help="REAPI instance name")
    p.add_argument("--ca-file", type=Path, help="CA certificate (PEM) for grpcs://")
    p.add_argument("--client-cert", type=Path, help="client certificate (PEM) for a grpcs:// server requiring mTLS")
    p.add_argument("--client-key", type=Path, help="private key (PEM) of --client-cert")
    p.add_argument("--token-file", type=Path, help="file holding a bearer token (or set GOMA_EXT_REMOTE_TOKEN)")
    p.add_argument("--allow-insecure-credentials", metavar="BOOL",
                   help="send the token and headers over plaintext grpc:// to a host that is not loopback")
    p.add_argument("--toolchain", choices=MODES["toolchain"],
                   help="inputs: the compiler and its libraries travel with every action (default); host: the "
                   "worker runs its own identical compiler")
    p.add_argument("--base-system", metavar="SONAMES",
                   help="comma-separated sonames (glob patterns) the worker's image provides; the rest travel")
    p.add_argument("--platform", metavar="KEY=VALUE,…", help="REAPI platform properties of every action")
    p.add_argument("--download", choices=MODES["download"],
                   help="all: every output comes down (default); minimal: native objects stay in the remote CAS")
    p.add_argument("--compression", choices=MODES["compression"],
                   help="gzip: compress the gRPC messages sent to the server (default off)")


def _add_arguments(p: argparse.ArgumentParser) -> None:
    add_settings_arguments(p)
    p.add_argument("--exec-root", type=Path, help="root of the input tree, relative to the build directory")
    p.add_argument("--naive-inputs", metavar="RSP", help="response file of every bitcode object of the link (stats)")
    p.add_argument("--no-proxy", action="store_true",
                   help=f"run the action in this process instead of through `goma-ext proxy` (or set {PROXY_ENV}=off)")
    p.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND ARGS…")
    p.set_defaults(run=run)


def _sources(args: argparse.Namespace) -> ProxySettings:
    flags = {"endpoint": args.remote, "instance": args.instance, "ca_file": args.ca_file,
             "client_cert": args.client_cert, "client_key": args.client_key,
             "token_file": args.token_file, "exec_root": getattr(args, "exec_root", None),
             "allow_insecure_credentials": args.allow_insecure_credentials, "toolchain": args.toolchain,
             "base_system": args.base_system, "platform": args.platform,
             "download": args.download, "compression": args.compression}
    section = section_from_yaml(args.config) if args.config else {}
    return ProxySettings(section, {k: str(v) if v is not None else None for k, v in flags.items()})


def config_from_args(args: argparse.Namespace, env: Mapping[str, str]) -> RemoteConfig | None:
    """The settings of add_settings_arguments' options over the environment over the YAML file."""
    sources = _sources(args)
    return load_config(sources.section, env, sources.flags)


def run(args: argparse.Namespace) -> int:
    argv = list(args.argv)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        raise GomaExtError("run: no command given (usage: goma-ext run [OPTIONS] -- COMMAND ARGS…)")
    if args.config:
        load_site()  # YAML settings need PyYAML from site-packages
    cwd, sources = Path.cwd(), _sources(args)
    cfg = load_config(sources.section, os.environ, sources.flags)
    cfg = download_from_flags(cfg, sources.flags) if cfg is not None else None
    use_proxy = cfg is not None and not args.no_proxy and not is_off(os.environ.get(PROXY_ENV, "on"))
    target = proxy_client.target_for(cfg, cwd, os.environ, args.config) if cfg is not None and use_proxy else None
    return execute(RunRequest(tuple(argv), cwd, cfg, args.naive_inputs, proxy=target, settings=sources))


def load_site() -> None:
    """Add site-packages (grpc, protobuf, PyYAML) when running under `python -S`."""
    if sys.flags.no_site:
        import site

        site.main()


def run_local(argv: Sequence[str], cwd: Path) -> int:
    import subprocess

    from thinlto_base.compile_env import compile_environment, explain_failure

    try:
        code = subprocess.run(list(argv), cwd=cwd, check=False, env=compile_environment()).returncode
    except OSError as e:
        raise GomaExtError(f"cannot run {argv[0]}: {e.strerror}") from e
    note = explain_failure(code)
    if note:
        print(note, file=sys.stderr)
    return code


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
    import tempfile

    try:
        fd, tmp = tempfile.mkstemp(dir=cwd, prefix=f"{DOWN_MARKER}.")
        with os.fdopen(fd, "w") as f:
            f.write(reason + "\n")
        os.replace(tmp, cwd / DOWN_MARKER)
    except OSError:
        pass


def _relay(stdout: bytes, stderr: bytes) -> None:
    sys.stdout.buffer.write(stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(stderr)
    sys.stderr.flush()


def _check_exit(code: int) -> None:
    if code < 0 or code >= 128:
        raise RemoteError(f"remote compiler died (exit {code})", temporary=True)


def _via_proxy(req: RunRequest, target: proxy_client.ProxyTarget, settings: ProxySettings, cfg: RemoteConfig,
               naive: int | None, start: float) -> stats.RunRecord:
    """Hand the action to the proxy; it writes the outputs, we relay its streams. GomaExtError -> local run."""
    compiler = identify_cached(req.argv[0], req.cwd, req.cwd / COMPILER_CACHE)
    message = wire.run_message(list(req.argv), str(req.cwd), (str(compiler.path), compiler.version, compiler.sha256),
                               settings.section, os.environ, settings.flags,
                               wire.token_hash(cfg.token))
    t = time.monotonic()
    frame = proxy_client.call(target, message)
    kind = frame.get("type")
    if kind == wire.ERROR:
        raise RemoteError(str(frame.get("message", "remote failure")), temporary=True)
    if kind == wire.REFUSED:
        raise RemoteError(f"proxy refused the action: {frame.get('message')}", temporary=False)
    if kind != wire.RESULT:
        raise proxy_client.ProxyError(f"proxy answered with a {kind!r} frame")
    try:
        result = wire.Result(frame)
        mode = stats.Mode(result.mode)
    except (wire.FrameError, ValueError) as e:
        raise proxy_client.ProxyError(f"proxy answer is malformed: {e}") from e
    _check_exit(result.exit_code)
    _relay(result.stdout, result.stderr)
    result.phases["proxy_round_trip"] = time.monotonic() - t
    return stats.RunRecord(records.output_of(req.argv), mode, result.exit_code, time.monotonic() - start,
                           result.bytes_uploaded, result.input_bytes, naive, result.phases)


def _remote(req: RunRequest, cfg: RemoteConfig, naive: int | None, start: float) -> stats.RunRecord:
    """Run remotely and relay the result; raises GomaExtError on any infrastructure failure."""
    if req.proxy is not None and req.settings is not None:
        try:
            return _via_proxy(req, req.proxy, req.settings, cfg, naive, start)
        except proxy_client.ProxyUnavailable as e:
            print(f"{WARNING_PREFIX} no proxy ({e}); running this action in-process", file=sys.stderr, flush=True)
    load_site()
    from goma_ext.remote.action_inputs import action_files
    from goma_ext.remote.client import RemoteExecutor
    from goma_ext.remote.toolchain import ToolchainCache

    down = marked_down(req.cwd, time.time())
    if down is not None:
        raise RemoteError(f"server marked unreachable in the last {DOWN_HOLD_S:.0f} s ({down})", temporary=True)
    files = action_files(req.argv, req.cwd)
    compiler = identify_cached(req.argv[0], req.cwd, req.cwd / COMPILER_CACHE)
    try:
        executor = RemoteExecutor(cfg, ToolchainCache(req.cwd / TOOLCHAIN_CACHE))
    except RemoteError as e:
        if e.code == "UNAVAILABLE":
            mark_down(req.cwd, str(e))
        raise
    try:
        res = executor.run(req.argv, req.cwd, files.inputs, files.outputs, compiler, keep_natives=True)
    finally:
        executor.close()
    _check_exit(res.exit_code)
    _relay(res.stdout, res.stderr)
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


def execute(req: RunRequest) -> int:
    """Remote first; any infrastructure failure -> one warning line and a local run. Records stats."""
    start = time.monotonic()
    naive = records.naive_bytes(req.naive_rsp, str(req.cwd))
    record: stats.RunRecord | None = None
    reason = "remote not configured"
    if req.remote is not None:
        try:
            record = _remote(req, req.remote, naive, start)
        except GomaExtError as e:
            reason = explain_failure(req.remote, str(e))
            print(f"{WARNING_PREFIX} remote execution failed, running locally: {reason}", file=sys.stderr, flush=True)
    if record is None:
        t = time.monotonic()
        code = run_local(req.argv, req.cwd)
        mode = stats.Mode.FALLBACK if req.remote is not None else stats.Mode.LOCAL
        record = stats.RunRecord(
            records.output_of(req.argv),
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
    """`python -S …/wrapper.py [OPTIONS] -- CMD…`: the wrapper without the rest of the CLI's imports."""
    from goma_ext.cliapp import Parser

    parser = Parser(prog="goma-ext run", description=__doc__)
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
