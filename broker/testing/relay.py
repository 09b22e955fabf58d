"""A TCP relay that makes a link slow: every piece of data it carries, either way, is held ``delay_ms`` plus up to
``jitter_ms`` at random, in order — what ``tc netem`` does where a kernel has it. A test network
(trafka.broker.testing.network) runs one inside the namespace of the host whose port it slows, and steers the
chosen peers' connections to it with an nftables redirect; the relay connects on to the port itself.

    python -m trafka.broker.testing.relay --listen 0.0.0.0:19092 --to 198.18.7.2:9092 --delay-ms 100 --jitter-ms 20
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float, jitter_s: float) -> None:
    """Carry what ``reader`` gives to ``writer``, each piece held delay_s (+ jitter), none overtaking another."""
    loop = asyncio.get_running_loop()
    pieces: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, data = await pieces.get()
            if not data:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()
        writer.close()

    delivering = asyncio.ensure_future(deliver())
    last_due = 0.0
    try:
        while data := await reader.read(65536):
            last_due = max(last_due, loop.time() + delay_s + random.uniform(0, jitter_s))
            pieces.put_nowait((last_due, data))
    except ConnectionError:
        pass
    finally:
        pieces.put_nowait((last_due, b""))
        try:
            await delivering
        except ConnectionError:
            pass


async def _serve(listen: tuple[str, int], to: tuple[str, int], delay_s: float, jitter_s: float) -> None:
    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*to)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pump(client_reader, upstream_writer, delay_s, jitter_s),
                             _pump(upstream_reader, client_writer, delay_s, jitter_s), return_exceptions=True)

    server = await asyncio.start_server(relay, *listen)
    print("relaying", flush=True)
    async with server:
        await server.serve_forever()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trafka.broker.testing.relay", description=__doc__.split("\n")[0])
    parser.add_argument("--listen", type=_address, required=True)
    parser.add_argument("--to", type=_address, required=True)
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args.listen, args.to, args.delay_ms / 1000, args.jitter_ms / 1000))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
