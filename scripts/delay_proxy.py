#!/usr/bin/env python3
"""A TCP proxy to a Postgres Unix socket that holds every chunk it forwards
for DELAY seconds in each direction: a network between the worker and the
server, for measuring what round trips cost (docs/benchmarks.md).

  scripts/delay_proxy.py DELAY PORT SOCKET
  scripts/delay_proxy.py 0.0005 55700 /tmp/pg-bench/.s.PGSQL.55620 &
  sluice-bench --backend 'postgresql:///postgres?host=127.0.0.1&port=55700&user=postgres' --workload W1 --no-baseline

asyncio's timers round a wait up to the millisecond, so a DELAY under 1 ms
holds each chunk about 1 ms; a DELAY of 0 adds only the proxy's own hop.
"""
import asyncio
import sys
import time


async def pump(reader, writer, delay):
    queue = asyncio.Queue()

    async def send():
        while True:
            due, data = await queue.get()
            if data is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    sender = asyncio.ensure_future(send())
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            queue.put_nowait((time.monotonic() + delay, data))
    finally:
        queue.put_nowait((0, None))
        await sender


async def main(delay, port, socket_path):
    async def handle(client_reader, client_writer):
        server_reader, server_writer = await asyncio.open_unix_connection(
            socket_path)
        await asyncio.gather(pump(client_reader, server_writer, delay),
                             pump(server_reader, client_writer, delay),
                             return_exceptions=True)

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main(float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
