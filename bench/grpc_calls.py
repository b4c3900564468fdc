"""`python -m bench grpc-calls`: the client CPU of one unary gRPC call in Python, the sync API (threads, as the
proxy makes its calls) against grpc.aio (one event loop), side by side in one run ([scale]).

The proxy's CPU per executed action is 5-6 such calls (lookup, FindMissingBlobs, Execute, BatchReadBlobs, ...) plus
its own work; whether grpc.aio would make the calls cheap enough to matter is measured here rather than assumed. A
server in another process (the sync API, 8 threads) echoes a 300-byte message on loopback; the client makes CALLS
calls, CONCURRENCY in flight (sync: a thread each; aio: tasks under a semaphore), and its CPU (time.process_time,
every thread of this process) is divided by the calls. Rounds alternate the two APIs; the medians are reported.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench import results
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


def measure(calls: int, concurrency: int, rounds: int) -> dict[str, list[tuple[float, float]]]:
    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        target = f"127.0.0.1:{int(server.stdout.readline())}"
        out: dict[str, list[tuple[float, float]]] = {"sync": [], "aio": []}
        for _ in range(rounds):
            out["sync"].append(sync_round(target, calls, concurrency))
            out["aio"].append(aio_round(target, calls, concurrency))
        return out
    finally:
        server.kill()
        server.wait()


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench grpc-calls", description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=4000, help="calls per round (default 4000)")
    p.add_argument("--concurrency", type=int, default=32, help="calls in flight (default 32)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each API, alternating (default 3)")
    p.add_argument("--cache", type=Path, help="unused (`bench all` passes it)")
    p.add_argument("--results", type=Path, default=results.DEFAULT_RESULTS_DIR)
    args = p.parse_args(argv)
    if min(args.calls, args.concurrency, args.rounds) < 1:
        p.error("--calls, --concurrency and --rounds must be positive")
    ctx = results.context()
    print(f"machine: {ctx['machine'].one_line()}")
    runs = measure(args.calls, args.concurrency, args.rounds)
    rows = [[api, statistics.median(c for c, _ in r), statistics.median(t for _, t in r)] for api, r in runs.items()]
    print(render(["API", "client CPU ms per call (median)", "calls/s (median)"], [[a, round(c, 3), round(t)]
                                                                                  for a, c, t in rows]))
    aio_vs_sync = rows[1][1] / rows[0][1]
    print(f"aio / sync, CPU per call: {aio_vs_sync:.2f}")
    command = "python -m bench grpc-calls" + (f" {' '.join(argv)}" if argv else "")
    data = dict(ctx, command=command, calls=args.calls, concurrency=args.concurrency, rounds=runs,
                medians={api: {"cpu_ms_per_call": c, "calls_per_s": t} for api, c, t in rows},
                aio_vs_sync_cpu=aio_vs_sync)
    print(f"results: {results.write(args.results, 'grpc-calls', data)}")
    return 0
