"""`python -m bench grpc-calls`: the client CPU of one unary gRPC call in Python, the sync API (threads, as the
proxy makes its calls) against grpc.aio (one event loop) and against gRPC C++'s callback API (what a compiled proxy
would use), side by side in one run ([scale]).

The proxy's CPU per executed action is 5-6 such calls (lookup, FindMissingBlobs, Execute, BatchReadBlobs, ...) plus
its own work; whether grpc.aio, or a compiled client, would make the calls cheap enough to matter is measured here
rather than assumed. A server in another process (the sync API, 8 threads) echoes a 300-byte message on loopback;
the client makes CALLS calls, CONCURRENCY in flight (sync: a thread each; aio: tasks under a semaphore; C++: each
completion starts the next call), and its CPU (every thread of the client's process: time.process_time, getrusage
in bench/grpc_echo_client.cc) is divided by the calls. Rounds alternate the three; the medians are reported. The
C++ client is compiled once per cache against Debian's libgrpc++-dev (gRPC 1.51; the venv's grpcio bundles a C core
of its own, of its own version: the results record both).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import prereqs, results
from bench.measure import BenchError, run
from bench.ninja_tools import CXX  # clang-19's, the example's compiler: every machine here has it
from bench.subjects.ninja_sdist import DEFAULT_CACHE
from bench.table import render

METHOD = "/bench.Echo/Echo"
PAYLOAD = b"x" * 300

SERVER = """
import sys, grpc
from concurrent import futures
handler = grpc.method_handlers_generic_handler(
    "bench.Echo", {"Echo": grpc.unary_unary_rpc_method_handler(lambda request, context: request)})
server = grpc.server(futures.ThreadPoolExecutor(8))
server.add_generic_rpc_handlers((handler,))
port = server.add_insecure_port("127.0.0.1:0")
server.start()
print(port, flush=True)
server.wait_for_termination()
"""


def sync_round(target: str, calls: int, concurrency: int) -> tuple[float, float]:
    """(client CPU ms per call, calls per second) through the sync API."""
    import grpc

    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(METHOD)
        call(PAYLOAD)  # connected before the clock starts
        wall, cpu = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(concurrency) as pool:
            for answer in pool.map(lambda _: call(PAYLOAD), range(calls)):
                assert answer == PAYLOAD
        return 1000 * (time.process_time() - cpu) / calls, calls / (time.perf_counter() - wall)


async def _aio_round(target: str, calls: int, concurrency: int) -> tuple[float, float]:
    import grpc

    async with grpc.aio.insecure_channel(target) as channel:
        call = channel.unary_unary(METHOD)
        await call(PAYLOAD)
        slots = asyncio.Semaphore(concurrency)

        async def one() -> bytes:
            async with slots:
                return await call(PAYLOAD)

        wall, cpu = time.perf_counter(), time.process_time()
        answers = await asyncio.gather(*(one() for _ in range(calls)))
        assert all(a == PAYLOAD for a in answers)
        return 1000 * (time.process_time() - cpu) / calls, calls / (time.perf_counter() - wall)


def aio_round(target: str, calls: int, concurrency: int) -> tuple[float, float]:
    """(client CPU ms per call, calls per second) through grpc.aio."""
    return asyncio.run(_aio_round(target, calls, concurrency))


NATIVE_SOURCE = Path(__file__).resolve().parent / "grpc_echo_client.cc"


def build_native(cache: Path) -> Path:
    """bench/grpc_echo_client.cc compiled against Debian's gRPC C++, once per cache, source, compiler and gRPC
    version (built under a name of its own, then renamed: two runs building at once both end with a whole binary)."""
    prereqs.ensure()
    compiler = subprocess.run([CXX, "--version"], capture_output=True, text=True).stdout.splitlines()[:1]
    key = hashlib.sha256(NATIVE_SOURCE.read_bytes() + f"{compiler}{native_version()}".encode()).hexdigest()[:16]
    binary = cache / f"grpc-echo-client-{key}" / "grpc_echo_client"
    if not binary.is_file():
        binary.parent.mkdir(parents=True, exist_ok=True)
        temp = binary.with_name(f"{binary.name}.{os.getpid()}.tmp")
        try:
            run([CXX, "-std=c++17", "-O2", "-o", str(temp), str(NATIVE_SOURCE),
                 *_pkg_config("--cflags", "--libs").split()])
            os.replace(temp, binary)
        finally:
            temp.unlink(missing_ok=True)
    return binary


def native_version() -> str:
    """The gRPC C++ version the client is built against (Debian's; grpcio bundles a C core of its own)."""
    return _pkg_config("--modversion")


def _pkg_config(*args: str) -> str:
    proc = subprocess.run(["pkg-config", *args, "grpc++"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"pkg-config {' '.join(args)} grpc++: {proc.stderr.strip() or 'failed'} (./dev setup installs "
                         "libgrpc++-dev)")
    return proc.stdout.strip()


def native_round(client: Path, target: str, calls: int, concurrency: int) -> tuple[float, float]:
    """(client CPU ms per call, calls per second) through gRPC C++'s callback API (bench/grpc_echo_client.cc)."""
    command = [str(client), target, METHOD, str(calls), str(concurrency)]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BenchError(f"{shlex.join(command)}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")
    try:
        answer = json.loads(proc.stdout)
        return float(answer["cpu_ms_per_call"]), float(answer["calls_per_s"])
    except (ValueError, KeyError, TypeError) as e:
        raise BenchError(f"{client}: expected one JSON line with cpu_ms_per_call and calls_per_s, got "
                         f"{proc.stdout.strip()[:200]!r} ({e})") from None


def grpc_version() -> str:
    import grpc

    return str(grpc.__version__)


def measure(calls: int, concurrency: int, rounds: int, native: Path) -> dict[str, list[tuple[float, float]]]:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        target = f"127.0.0.1:{int(server.stdout.readline())}"
        out: dict[str, list[tuple[float, float]]] = {"sync": [], "aio": [], "c++": []}
        for _ in range(rounds):
            out["sync"].append(sync_round(target, calls, concurrency))
            out["aio"].append(aio_round(target, calls, concurrency))
            out["c++"].append(native_round(native, target, calls, concurrency))
        return out
    finally:
        server.kill()
        server.wait()


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench grpc-calls", description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=4000, help="calls per round (default 4000)")
    p.add_argument("--concurrency", type=int, default=32, help="calls in flight (default 32)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each API, alternating (default 3)")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE,
                   help="where the C++ client is built (default %(default)s)")
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    if min(args.calls, args.concurrency, args.rounds) < 1:
        p.error("--calls, --concurrency and --rounds must be positive")
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    runs = measure(args.calls, args.concurrency, args.rounds, build_native(args.cache))
    rows = [[api, statistics.median(c for c, _ in r), statistics.median(t for _, t in r)] for api, r in runs.items()]
    print(render(["API", "client CPU ms per call (median)", "calls/s (median)"], [[a, round(c, 3), round(t)]
                                                                                  for a, c, t in rows]))
    aio_vs_sync, native_vs_sync = rows[1][1] / rows[0][1], rows[2][1] / rows[0][1]
    print(f"CPU per call, aio / sync: {aio_vs_sync:.2f}; c++ / sync: {native_vs_sync:.2f}")
    command = "python -m bench grpc-calls" + (f" {' '.join(argv)}" if argv else "")
    data = dict(ctx, command=command, calls=args.calls, concurrency=args.concurrency, rounds=runs,
                medians={api: {"cpu_ms_per_call": c, "calls_per_s": t} for api, c, t in rows},
                aio_vs_sync_cpu=aio_vs_sync, native_vs_sync_cpu=native_vs_sync,
                grpc_versions={"grpcio": grpc_version(), "grpc++": native_version()})
    print(f"results: {results.write(args.results, 'grpc-calls', data)}")
    return 0
