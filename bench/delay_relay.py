"""A TCP relay that delays every byte by a fixed time in each direction: the latency half of a shaped link.

    python bench/delay_relay.py LISTEN_ADDR:PORT TARGET_ADDR:PORT ONE_WAY_MS

This machine's kernel has no netem (CONFIG_NET_SCH_NETEM is off), so `tc` can shape a link's rate (tbf) but not
its delay. The relay runs in the server's network namespace on the link's address and forwards to the cluster
on that namespace's loopback; each chunk read is written ONE_WAY_MS later, in order. At most WINDOW bytes wait
per direction (then it stops reading, as a full pipe would). Standard library only (it runs under `ip netns exec`).
"""

from __future__ import annotations

import asyncio
import sys
import time

WINDOW = 8 << 20  # bytes in flight per direction: above 100 Mbit/s x 20 ms x a few, never a bound of its own
CHUNK = 1 << 16


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    room = asyncio.Semaphore(WINDOW // CHUNK)

    async def write() -> None:
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.write_eof() if writer.can_write_eof() else writer.close()
                return
            writer.write(data)
            await writer.drain()
            room.release()

    task = asyncio.create_task(write())
    try:
        while True:
            await room.acquire()
            data = await reader.read(CHUNK)
            queue.put_nowait((time.monotonic() + delay_s, data))
            if not data:
                break
        await task
    except (ConnectionError, OSError):
        task.cancel()
        writer.close()


async def _serve(listen: tuple[str, int], target: tuple[str, int], delay_s: float) -> None:
    async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            s_reader, s_writer = await asyncio.open_connection(*target)
        except OSError:
            c_writer.close()
            return
        await asyncio.gather(_pump(c_reader, s_writer, delay_s), _pump(s_reader, c_writer, delay_s),
                             return_exceptions=True)
        for w in (c_writer, s_writer):
            w.close()

    server = await asyncio.start_server(handle, *listen, limit=CHUNK)
    print(f"relay {listen[0]}:{listen[1]} -> {target[0]}:{target[1]}, {delay_s * 1000:g} ms each way", flush=True)
    async with server:
        await server.serve_forever()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    asyncio.run(_serve(_address(argv[0]), _address(argv[1]), float(argv[2]) / 1000))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
