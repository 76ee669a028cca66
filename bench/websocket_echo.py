"""A WebSocket echo server and a round-trip client (RFC 6455, small text frames only), for bench_dataplane.py.

The server answers the upgrade of any path and sends each text frame back unmasked; the client holds a number of
connections through a proxy and counts echo round trips. Only what the benchmark needs: frames under 126 bytes,
no fragmentation, no extensions.
    python bench/websocket_echo.py PORT      # serve until killed
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import socket
import sys
import threading
import time

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC11B85"
MESSAGE = b"x" * 64


def accept_key(key: bytes) -> bytes:
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


async def _serve_one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        key = next(line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")
                   if line.lower().startswith(b"sec-websocket-key:"))
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: " + accept_key(key) + b"\r\n\r\n")
        while True:
            first, second = await reader.readexactly(2)
            length = second & 0x7F
            mask = await reader.readexactly(4)
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(await reader.readexactly(length)))
            if first & 0x0F == 8:  # close
                writer.write(b"\x88\x00")
                break
            writer.write(bytes((first, length)) + payload)
    except (asyncio.IncompleteReadError, ConnectionError, StopIteration):
        pass
    finally:
        writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(_serve_one, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def _frame(payload: bytes) -> bytes:
    mask = os.urandom(4)
    return bytes((0x81, 0x80 | len(payload))) + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def _open(port: int, host: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16))
    sock.sendall(b"GET /ws HTTP/1.1\r\nHost: " + host.encode() + b"\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            raise RuntimeError("the connection closed during the upgrade")
        head += chunk
    if not head.startswith(b"HTTP/1.1 101") or accept_key(key) not in head:
        raise RuntimeError(f"no upgrade: {head[:200]!r}")
    return sock


def round_trips(port: int, host: str, seconds: float, connections: int) -> tuple[int, list[float]]:
    """Echo round trips of a 64-byte text frame on `connections` upgraded connections (a thread each) for
    `seconds`: (count, each one's seconds)."""
    socks = [_open(port, host) for _ in range(connections)]
    latencies: list[list[float]] = [[] for _ in socks]
    expected = bytes((0x81, len(MESSAGE))) + MESSAGE
    deadline = time.monotonic() + seconds

    def loop(i: int) -> None:
        sock, frame = socks[i], _frame(MESSAGE)
        while time.monotonic() < deadline:
            start = time.perf_counter()
            sock.sendall(frame)
            answer = b""
            while len(answer) < len(expected):
                chunk = sock.recv(4096)
                if not chunk:
                    raise RuntimeError("the connection closed")
                answer += chunk
            if answer != expected:
                raise RuntimeError(f"echo differs: {answer[:80]!r}")
            latencies[i].append(time.perf_counter() - start)

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(len(socks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for sock in socks:
        sock.close()
    every = [x for each in latencies for x in each]
    return len(every), every


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1])))
