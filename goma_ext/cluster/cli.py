"""`goma-ext cluster start|stop|status|token|pki`: a PostgreSQL + BuildGrid + workers cluster, on one host
(`--role all`, 127.0.0.1) or across hosts (one `--role server`, any number of `--role worker`)."""

from __future__ import annotations

import argparse
import json
import os
import pwd
from pathlib import Path

from goma_ext.cluster import manager, pki, roles, tokens
from goma_ext.cluster.roles import Role
from goma_ext.cluster.server import DEFAULT_POLL_S, GRPC_COMPRESSION

DEFAULT_STATE = Path(".state/cluster")
TOKEN_FOR = {tokens.Role.CLIENT: "client", tokens.Role.CACHE_WRITER: "cache-writer", tokens.Role.WORKER: "worker"}


def add_parser(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "cluster", help="start, stop or inspect a local REAPI cluster (PostgreSQL + BuildGrid + workers)"
    )
    sub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    start = sub.add_parser("start", help="start PostgreSQL, BuildGrid and workers on 127.0.0.1")
    start.add_argument("--port", type=int, default=0, help="BuildGrid port (default: a free one, kept across restarts)")
    start.add_argument("--workers", type=int, default=2, help="worker processes (default: %(default)s)")
    start.add_argument("--instance", default="", help="REAPI instance name (default: empty)")
    start.add_argument(
        "--server-venv", type=Path, help="venv for BuildGrid (default: STATE/server-venv, created on demand)"
    )
    start.add_argument(
        "--tls-cert", type=Path, help="PEM certificate: serve grpcs:// on --tls-port, and no plaintext grpc://"
    )
    start.add_argument("--tls-key", type=Path, help="PEM private key for --tls-cert")
    start.add_argument("--tls-port", type=int, help="TLS port (default: a free one)")
    start.add_argument(
        "--tls-ca", type=Path, help="CA certificate the workers verify --tls-cert with (default: --tls-cert itself)"
    )
    start.add_argument(
        "--also-plaintext", action="store_true", help="with --tls-cert: also serve plaintext grpc:// on --port"
    )
    start.add_argument(
        "--tls-client-ca", type=Path,
        help="with --tls-cert: require client certificates (mTLS) signed by this CA; needs --worker-cert/--worker-key",
    )
    start.add_argument(
        "--worker-cert", type=Path,
        help="client certificate the cluster's own probe and status (and a worker host's workers) present; an all "
        "host's own workers reach BuildGrid on a private Unix socket",
    )
    start.add_argument("--worker-key", type=Path, help="private key of --worker-cert")
    start.add_argument(
        "--auth", choices=[a.value for a in manager.Auth], default=manager.Auth.JWT.value,
        help="authentication: jwt (a token per role in STATE/auth, each refused outside its role; default) or none "
             "(anyone who reaches the port may do anything: a single trusted user only)",
    )
    start.add_argument(
        "--compiler", action="append", default=[], help="allow-listed compiler for the workers (repeatable)"
    )
    start.add_argument(
        "--run-as", metavar="USER",
        help="as root: the unprivileged user workers run actions as (default: goma-ext-runner, created if missing)",
    )
    start.add_argument(
        "--worker-arg", action="append", default=[], metavar="ARG",
        help="extra `goma-ext worker` argument, e.g. --worker-arg=--memory=8G (repeatable)",
    )
    _add_role_options(start)
    stop = sub.add_parser("stop", help="stop what this host runs (workers, cleanup, BuildGrid, redis, PostgreSQL)")
    stop.add_argument("--role", choices=[r.value for r in Role],
                      help="stop only the server side or only the workers (default: everything this host runs)")
    token = sub.add_parser("token", help="print a token file (0600), renewed when it expires within 30 days")
    token.add_argument(
        "--for", dest="token_for", choices=[TOKEN_FOR[r] for r in tokens.Role], default=TOKEN_FOR[tokens.Role.CLIENT],
        help="whose token: client (runs actions, reads the cache; default), cache-writer (a client that may also "
             "write the action cache: trusted writers only) or worker",
    )
    for q in (start, stop, sub.add_parser("status", help="show each component and probe the endpoint"), token):
        q.add_argument("--state", type=Path, default=DEFAULT_STATE, help="state directory (default: %(default)s)")
        q.set_defaults(run=run)
    made = sub.add_parser(
        "pki", help="make a development CA, a server certificate and client certificates for mTLS (openssl)",
        description=pki.__doc__,
    )
    made.add_argument("directory", type=Path, metavar="DIR", help="where the files go (an existing CA there is kept)")
    made.add_argument(
        "--server-name", action="append", default=[], metavar="NAME",
        help="DNS name or IP address of the server certificate (repeatable; the first is its CN)",
    )
    made.add_argument(
        "--client", action="append", default=[], metavar="NAME", help="a client certificate for NAME (repeatable)"
    )
    made.add_argument("--days", type=int, default=pki.DEFAULT_DAYS, help="validity (default: %(default)s)")
    made.set_defaults(run=run_pki)


def run_pki(args: argparse.Namespace) -> int:
    for f in pki.make(args.directory, args.server_name, args.client, args.days):
        print(f"{f.path}  {f.what}")
    return 0


def _add_role_options(start: argparse.ArgumentParser) -> None:
    """What a host of a multi-host cluster runs and how it reaches the others."""
    start.add_argument(
        "--role", choices=[r.value for r in Role], default=Role.ALL.value,
        help="all: everything on 127.0.0.1 (default); server: PostgreSQL, redis, BuildGrid on --listen over TLS; "
             "worker: workers joining --server",
    )
    g = start.add_argument_group("--role server")
    g.add_argument("--listen", action="append", default=[], metavar="ADDR",
                   help="address BuildGrid binds (repeatable; default 127.0.0.1; 0.0.0.0 for every interface)")
    g.add_argument("--plaintext", action="store_true",
                   help="serve grpc:// without TLS (tokens cross the network unencrypted: a trusted network only)")
    g.add_argument("--cas-max-size", metavar="SIZE",
                   help=f"CAS bound: least recently used blobs go above it (default {roles.DEFAULT_CAS_MAX_SIZE})")
    g.add_argument("--ac-max-memory", metavar="SIZE",
                   help=f"action cache (redis) memory bound, LRU (default {roles.DEFAULT_AC_MAX_MEMORY})")
    g.add_argument("--poll-interval", type=_seconds, default=DEFAULT_POLL_S, metavar="SECONDS",
                   help="how often the scheduler looks for work and finished actions (default %(default)s): each "
                        "action waits up to about twice this; an idle server costs ~30%% of a core at 0.05, ~10%% "
                        "at 0.25, ~3%% at 1")
    g.add_argument("--compression", choices=("off", *GRPC_COMPRESSION),
                   help="gzip: BuildGrid compresses every gRPC answer (what clients download; the workers' too), "
                        "for clients behind a slow link (their `remote.compression: gzip` compresses uploads); costs "
                        "server CPU (default off; also with --role all)")
    w = start.add_argument_group("--role worker")
    w.add_argument("--server", metavar="URL", help="the server host's endpoint, e.g. grpcs://10.0.0.5:8981")
    w.add_argument("--token-file", type=Path, metavar="FILE",
                   help="the worker token (0600) copied from the server host's STATE/auth/worker.token")
    w.add_argument("--bot-id", help="bot id prefix (default: the host name)")


def _spec(args: argparse.Namespace, state: Path) -> manager.ClusterSpec:
    role = Role(args.role)
    roles.check(roles.RoleOptions(
        role=role, server=args.server, token_file=args.token_file, tls_ca=args.tls_ca, tls_cert=args.tls_cert,
        plaintext=args.plaintext, listen=tuple(args.listen), cas_max_size=args.cas_max_size,
        ac_max_memory=args.ac_max_memory, compression=args.compression,
    ))
    return manager.ClusterSpec(
        state=state,
        port=args.port,
        workers=args.workers,
        instance=args.instance,
        server_venv=args.server_venv,
        tls_port=args.tls_port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        tls_ca=args.tls_ca,
        tls_client_ca=args.tls_client_ca,
        worker_cert=args.worker_cert,
        worker_key=args.worker_key,
        also_plaintext=args.also_plaintext,
        auth=manager.Auth(args.auth),
        # the workers run in /, not here: a relative path is made absolute (a bare name is looked up on PATH)
        compilers=tuple(os.path.abspath(c) if os.sep in c else c for c in args.compiler),
        run_as=args.run_as,
        worker_args=tuple(args.worker_arg),
        role=role,
        listen=tuple(args.listen) or ("127.0.0.1",),
        cas_max_size=roles.parse_size(args.cas_max_size or roles.DEFAULT_CAS_MAX_SIZE),
        ac_max_memory=roles.parse_size(args.ac_max_memory or roles.DEFAULT_AC_MAX_MEMORY),
        server_url=args.server,
        worker_token_file=args.token_file,
        bot_id=args.bot_id,
        poll_s=args.poll_interval,
        compression=args.compression or "off",
    )


def _changed_options(args: argparse.Namespace, st: manager.ClusterState) -> list[str]:
    """The options of ARGS that ask for another transport or authentication than the existing cluster ST was made
    with. `start` on an existing state restarts the cluster as it was made; without this, such options would be
    silently left out (a `--tls-client-ca` restart serving what it served before)."""
    def differs(given: Path | None, made: str | None) -> bool:
        return given is not None and (made is None or given.resolve() != Path(made))

    paths = (("--tls-cert", args.tls_cert, st.tls_cert), ("--tls-key", args.tls_key, st.tls_key),
             ("--tls-ca", args.tls_ca, st.tls_ca), ("--tls-client-ca", args.tls_client_ca, st.tls_client_ca),
             ("--worker-cert", args.worker_cert, st.worker_cert), ("--worker-key", args.worker_key, st.worker_key))
    changed = [f"{flag} {str(given)[:200]}" for flag, given, made in paths if differs(given, made)]
    if args.also_plaintext and not st.plaintext:
        changed.append("--also-plaintext")
    if args.auth != st.auth and args.auth == manager.Auth.NONE.value:
        changed.append("--auth none")
    if args.compression and args.compression != st.compression:
        changed.append(f"--compression {args.compression}")
    if args.instance and args.instance != st.instance:
        changed.append(f"--instance {args.instance[:100]}")
    return changed


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0.001 <= value <= 10:
        raise argparse.ArgumentTypeError(f"not a number of seconds between 0.001 and 10: {text[:40]!r}")
    return value


def run(args: argparse.Namespace) -> int:
    try:
        state: Path = args.state.resolve()
        manager.check_state(state)
        found = manager.load(state)  # a state directory that cannot even be looked at is one line, here
    except (OSError, RuntimeError) as e:  # RuntimeError: pathlib's symlink loop
        raise manager.ClusterError(f"--state {str(args.state)[:200]}: {getattr(e, 'strerror', None) or e}") from None
    if args.cluster_command == "start":
        spec = _spec(args, state)
        changed = _changed_options(args, found) if found is not None else []
        if changed:
            raise manager.ClusterError(
                f"--state {str(args.state)[:200]} holds a cluster made without {' '.join(changed)}: start it as it was "
                "made (`cluster status` shows how), or give these options another --state"
            )
        st = manager.start(spec)
        _print_started(st, state)
        return 0
    if args.cluster_command == "token":
        whose = next(r for r, name in TOKEN_FOR.items() if name == args.token_for)
        # a worker host only holds the worker token it was given: it mints none (it has no secret to sign with)
        token = found.token_file(whose) if found is not None and found.host_role.runs_server else None
        if found is None or token is None:
            raise manager.ClusterError(f"no cluster server with authentication in {state} (`cluster start` makes one)")
        manager.ensure_tokens(found)
        print(token)
        return 0
    if args.cluster_command == "stop":
        role = Role(args.role) if args.role else None
        stopped = manager.stop(state, role)
        print(f"cluster {role.value + ' role ' if role else ''}stopped" if stopped else f"no cluster state in {state}")
        return 0
    info = manager.status(state)
    print(json.dumps(info, indent=2))
    return 0 if info.get("started") and info.get("buildgrid") == "running" else 1


def _print_started(st: manager.ClusterState, state: Path) -> None:
    """What a worker host and a client need: the endpoint, the CA, the token files."""
    if st.host_role is Role.WORKER:
        print(f"workers up: {st.workers} joining {st.endpoint} (bot ids {st.bot_id}-N, state {state})")
        return
    endpoints = ", ".join(e for e in (st.tls_endpoint, st.plaintext_endpoint) if e)
    print(
        f"cluster up: {endpoints} (instance {st.instance!r}, role {st.role}, "
        f"{st.workers} worker{'s' if st.workers != 1 else ''}, auth {st.auth}, state {state})"
    )
    if st.host_role is Role.SERVER:
        _print_server(st)
    print(f"use it: gn-thinlto gen --remote {st.endpoint} …   or   export GOMA_EXT_REMOTE={st.endpoint}")
    if st.worker_socket:
        print(f"        or, as {pwd.getpwuid(os.geteuid()).pw_name} on this host, grpc://unix:{st.worker_socket}   "
              "(no other user can take that address over, as one can the port while BuildGrid is down)")
    if st.tls_port and st.tls_ca:
        print(f"        export GOMA_EXT_REMOTE_CA_FILE={st.tls_ca}")
    if st.tls_client_ca:
        print(f"        export GOMA_EXT_REMOTE_CLIENT_CERT=… GOMA_EXT_REMOTE_CLIENT_KEY=…   (a client certificate "
              f"signed by {st.tls_client_ca}: the server requires one)")
    token = st.token_file(tokens.Role.CLIENT)
    if token is not None:
        print(f"        export GOMA_EXT_REMOTE_TOKEN_FILE={token}   (client token, mode 0600)")
    writer = st.token_file(tokens.Role.CACHE_WRITER)
    if writer is not None:
        print(f"cache writer token (a client token that may also write the action cache; trusted writers only): "
              f"{writer}")


def _print_server(st: manager.ClusterState) -> None:
    port = st.tls_port or st.port
    scheme = "grpcs" if st.tls_port else "grpc"
    wildcard = any(h in ("0.0.0.0", "::") for h in st.listen)
    print(f"listening on {', '.join(f'{scheme}://{h}:{port}' for h in st.listen)}"
          + (" (every interface: dial this host's address)" if wildcard else ""))
    print(f"CAS bounded to {st.cas_max_size} bytes (least recently used evicted); action cache in redis, persistent")
    worker_token = st.token_file(tokens.Role.WORKER)
    files = [f for f in (f"CA {st.tls_ca}" if st.tls_port else "",
                         f"worker token {worker_token} (keep it 0600)" if worker_token else "") if f]
    if files:
        print(f"worker hosts: copy the {' and the '.join(files)}, then")
    print(f"        goma-ext cluster start --role worker --server {scheme}://SERVER-ADDRESS:{port}"
          + (" --tls-ca CA" if st.tls_port else "") + (" --token-file TOKEN" if worker_token else ""))
