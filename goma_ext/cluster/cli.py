"""`goma-ext cluster start|stop|status|token|pki`: a local PostgreSQL + BuildGrid + workers cluster on 127.0.0.1."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from goma_ext.cluster import manager, pki, tokens

DEFAULT_STATE = Path(".state/cluster")


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
        "--worker-cert", type=Path, help="client certificate the workers (and the cluster's own probe) present"
    )
    start.add_argument("--worker-key", type=Path, help="private key of --worker-cert")
    start.add_argument(
        "--auth", choices=[a.value for a in manager.Auth], default=manager.Auth.JWT.value,
        help="client and worker authentication: jwt (tokens in STATE/auth, default) or none",
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
    for q in (
        start,
        sub.add_parser("stop", help="stop workers, BuildGrid and PostgreSQL"),
        sub.add_parser("status", help="show each component and probe the endpoint"),
        sub.add_parser("token", help="print the client token file (0600), renewed when it expires within 30 days"),
    ):
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


def run(args: argparse.Namespace) -> int:
    try:
        state: Path = args.state.resolve()
        manager.load(state)  # a state directory that cannot even be looked at is one line, here
    except (OSError, RuntimeError) as e:  # RuntimeError: pathlib's symlink loop
        raise manager.ClusterError(f"--state {str(args.state)[:200]}: {getattr(e, 'strerror', None) or e}") from None
    if args.cluster_command == "start":
        st = manager.start(
            manager.ClusterSpec(
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
                compilers=tuple(args.compiler),
                run_as=args.run_as,
                worker_args=tuple(args.worker_arg),
            )
        )
        endpoints = ", ".join(e for e in (st.tls_endpoint, st.plaintext_endpoint) if e)
        print(
            f"cluster up: {endpoints} (instance {st.instance!r}, "
            f"{st.workers} worker{'s' if st.workers != 1 else ''}, auth {st.auth}, state {state})"
        )
        print(f"use it: gn-thinlto gen --remote {st.endpoint} …   or   export GOMA_EXT_REMOTE={st.endpoint}")
        if st.tls_port and st.tls_ca:
            print(f"        export GOMA_EXT_REMOTE_CA_FILE={st.tls_ca}")
        if st.tls_client_ca:
            print(f"        export GOMA_EXT_REMOTE_CLIENT_CERT=… GOMA_EXT_REMOTE_CLIENT_KEY=…   (a client certificate "
                  f"signed by {st.tls_client_ca}: the server requires one)")
        token = st.token_file(tokens.Role.CLIENT)
        if token is not None:
            print(f"        export GOMA_EXT_REMOTE_TOKEN_FILE={token}   (client token, mode 0600)")
        return 0
    if args.cluster_command == "token":
        found = manager.load(state)
        token = found.token_file(tokens.Role.CLIENT) if found is not None else None
        if found is None or token is None:
            raise manager.ClusterError(f"no cluster with authentication in {state} (`cluster start` makes one)")
        manager.ensure_tokens(found)
        print(token)
        return 0
    if args.cluster_command == "stop":
        print("cluster stopped" if manager.stop(state) else f"no cluster state in {state}")
        return 0
    info = manager.status(state)
    print(json.dumps(info, indent=2))
    return 0 if info.get("started") and info.get("buildgrid") == "running" else 1
