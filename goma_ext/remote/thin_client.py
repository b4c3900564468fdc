"""`goma-ext run`'s fast path: hand the action to the running proxy and relay its answer (standard library only).

ninja runs this file under `python -S` for every remote backend (see wrapper.default_launcher). It handles
the common case: options it knows, a proxy already listening, the compiler's identity already remembered in
the build directory, and a result from the proxy. Anything else (a --config file, --no-proxy, no proxy yet,
a proxy of another version, a lost connection, an unknown compiler, a remote failure) goes to
goma_ext.remote.wrapper, the full client, which starts and replaces proxies and falls back in-process or
locally. Nothing is run or written before that hand-over, so the full client starts from a clean slate.
"""

from __future__ import annotations

import os
import sys

if __name__ == "__main__" and not __package__:  # run as a script
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# The imports below come after the script-mode path set-up above.
import time
from collections.abc import Mapping, Sequence

from goma_ext.remote import identity_cache, records
from goma_ext.remote import proxy_protocol as wire
from goma_ext.remote.names import COMPILER_CACHE, DEFAULT_STATS_LOG, PROXY_ENV, TOKEN_ENV, is_off

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up budget)
if TYPE_CHECKING:
    from typing import Any

# The options of `goma-ext run` this path understands, and the settings they give.
OPTIONS = {"--remote": "endpoint", "--instance": "instance", "--ca-file": "ca_file", "--token-file": "token_file",
           "--client-cert": "client_cert", "--client-key": "client_key",
           "--allow-insecure-credentials": "allow_insecure_credentials", "--exec-root": "exec_root",
           "--toolchain": "toolchain", "--base-system": "base_system", "--platform": "platform",
           "--download": "download", "--compression": "compression",
           "--naive-inputs": "naive_inputs"}
# Settings that select the proxy, and their environment variables (command line wins, as in load_config).
SELECTING = {"endpoint": "GOMA_EXT_REMOTE", "instance": "GOMA_EXT_REMOTE_INSTANCE",
             "ca_file": "GOMA_EXT_REMOTE_CA_FILE", "token_file": "GOMA_EXT_REMOTE_TOKEN_FILE",
             "client_cert": "GOMA_EXT_REMOTE_CLIENT_CERT", "client_key": "GOMA_EXT_REMOTE_CLIENT_KEY",
             "compression": "GOMA_EXT_REMOTE_COMPRESSION"}


def parse(argv: Sequence[str]) -> tuple[dict[str, str], list[str]] | None:
    """(settings from options, command), or None for anything this path does not handle."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv):
        name, eq, value = argv[i].partition("=")
        if argv[i] == "--":
            command = list(argv[i + 1 :])
            return (opts, command) if command else None
        if name not in OPTIONS:
            return None
        if not eq:
            i += 1
            if i == len(argv):
                return None
            value = argv[i]
        opts[OPTIONS[name]] = value
        i += 1
    return None


def _ask(files: Mapping[str, str], message: Mapping[str, Any], silence_s: float) -> dict[str, Any] | None:
    """The proxy's final frame, or None if it is not there, went away or went silent (then marked hung)."""
    try:
        sock = wire.connect(files["sock"])  # only a proxy of this user's
    except OSError:
        return None
    try:
        return wire.exchange(sock, message, silence_s)
    except TimeoutError:
        wire.mark_hung(files["hung"])
        return None
    except (OSError, EOFError, wire.FrameError):
        return None
    finally:
        sock.close()


def fast(argv: Sequence[str], env: Mapping[str, str]) -> int | None:
    """Run the action through the proxy: its exit code, or None to hand over to the full client."""
    answered = answer(argv, env)
    if answered is None:
        return None
    code, stdout, stderr = answered
    sys.stdout.buffer.write(stdout)
    sys.stdout.flush()
    sys.stderr.buffer.write(stderr)
    sys.stderr.flush()
    return code


def answer(argv: Sequence[str], env: Mapping[str, str]) -> tuple[int, bytes, bytes] | None:
    """fast() without writing the compiler's output: (exit code, stdout, stderr), or None to hand over to the full
    client. The working directory is the build directory. The backend step server calls this in its own process
    for each remote backend (gn_thinlto.steps.step_serving: no interpreter start-up per action); it is
    thread-safe, and says only warnings on sys.stderr."""
    parsed = parse(argv)
    if parsed is None or is_off(env.get(PROXY_ENV, "on")) or is_off(env.get("GOMA_EXT_REMOTE", "on")):
        return None
    opts, command = parsed
    chosen = {name: opts.get(name, env.get(var, "")) for name, var in SELECTING.items()}
    endpoint = chosen["endpoint"].strip()
    if is_off(endpoint):
        return None
    cwd = os.getcwd()
    token = wire.token_hash(env.get(TOKEN_ENV))
    key = wire.endpoint_key(cwd, endpoint, chosen["instance"], chosen["ca_file"], chosen["token_file"], token,
                            client_cert=chosen["client_cert"], client_key=chosen["client_key"],
                            compression=chosen["compression"])
    try:
        shards = wire.shard_count(env)
    except ValueError:
        return None
    files = wire.paths(wire.state_dir(env), key, wire.shard_of(command, shards))
    compiler = identity_cache.resolve(command[0], cwd, env.get("PATH", os.defpath))
    known = identity_cache.lookup(compiler, os.path.join(cwd, COMPILER_CACHE)) if compiler else None
    if compiler is None or known is None or wire.hung_recently(files["hung"]):
        return None
    start = time.monotonic()
    flags = {k: v for k, v in opts.items() if k != "naive_inputs"}
    message = wire.run_message(command, cwd, (compiler, *known), {}, env, flags, token)
    try:
        silence = wire.silence_s(env)
    except ValueError:
        return None
    frame = _ask(files, message, silence)
    if frame is None or frame.get("type") != wire.RESULT:
        return None
    try:
        result = wire.Result(frame)
    except wire.FrameError:
        return None
    if result.exit_code < 0 or result.exit_code >= 128:
        return None  # the compiler died remotely: the full client retries, then runs it locally
    result.phases["proxy_round_trip"] = time.monotonic() - start
    line = records.line(records.output_of(command), result.mode, result.exit_code, time.monotonic() - start,
                        result.bytes_uploaded, result.input_bytes, records.naive_bytes(opts.get("naive_inputs"), cwd),
                        result.phases)
    try:
        records.append(os.path.join(cwd, DEFAULT_STATS_LOG), line)
    except OSError as e:
        sys.stderr.write(f"goma-ext: warning: cannot append to {DEFAULT_STATS_LOG}: {e.strerror}\n")
    return result.exit_code, result.stdout, result.stderr


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    code = fast(args, os.environ)
    if code is not None:
        return code
    from goma_ext.remote import wrapper

    return wrapper.main(args)


if __name__ == "__main__":
    sys.exit(main())
