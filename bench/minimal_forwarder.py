"""The least a Python TCP forwarder can do per connection: the floor under `pyngress proxy`'s CPU cost.

One process, one thread, a bare epoll loop: accept, read the first bytes (where the proxy reads the ClientHello,
this routes nothing), connect to the one backend without blocking, then splice with the proxy's own Splicer
(services/proxy/splice.py). It parses nothing, keeps no timeouts, counters or table, and trusts its clients.
bench_passthrough.py --floor runs it as a fourth path beside the proxy and nginx, so that what the proxy adds
to the splice (the ClientHello, routing, timers, its thread beside asyncio) is measured in the same run.
Run: python bench/minimal_forwarder.py LISTEN_PORT BACKEND_PORT
"""
from __future__ import annotations

import _socket
import select
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.proxy.splice import (EPOLLIN, READ_EVENTS, READ_SIZE, READ_WRITE_EVENTS, Side,  # noqa: E402
                                   Splicer)


class Forwarder:
    def __init__(self, listen_port: int, backend_port: int) -> None:
        self.backend = ("127.0.0.1", backend_port)
        self.listener = socket.create_server(("127.0.0.1", listen_port), backlog=4096)
        self.listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.listener.setblocking(False)
        self.epoll = select.epoll()
        self.handlers: dict[int, object] = {}
        self.to_close: list[Side] = []
        self.again: list[Side] = []
        self.splicer = Splicer(self, lambda side: None)
        self.epoll.register(self.listener.fileno(), EPOLLIN)

    def run(self) -> None:
        listener_fd = self.listener.fileno()
        while True:
            for fd, events in self.epoll.poll(0 if self.again else -1):
                if fd == listener_fd:
                    self.accept()
                    continue
                handler = self.handlers.get(fd)
                if isinstance(handler, Side):
                    handler.on_event(events)
                elif isinstance(handler, tuple):
                    self.connected(*handler)
                elif handler is not None:
                    self.first_bytes(handler)
            again, self.again = self.again, []
            for side in again:
                if side.fd >= 0:
                    side.on_event(EPOLLIN)
            for side in self.to_close:
                side.sock.close()
            self.to_close.clear()

    def close_later(self, fd: int, side: Side) -> None:
        del self.handlers[fd]
        self.to_close.append(side)

    def ready(self, side: Side) -> None:
        self.again.append(side)

    def accept(self) -> None:
        fd, _ = self.listener._accept()
        client = _socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fd)
        client.setblocking(False)
        self.handlers[fd] = client
        self.first_bytes(client)  # as the proxy does: read first (they are usually in at accept), register after
        self.epoll.register(fd, READ_EVENTS)

    def first_bytes(self, client: _socket.socket) -> None:
        try:
            data = client.recv(READ_SIZE)
        except BlockingIOError:
            return
        self.handlers[client.fileno()] = None  # nothing more until spliced: its clients wait for the server
        upstream = _socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream.connect_ex(self.backend)  # EINPROGRESS: writable once connected
        self.handlers[upstream.fileno()] = (client, upstream, data)
        self.epoll.register(upstream.fileno(), READ_WRITE_EVENTS)

    def connected(self, client: _socket.socket, upstream: _socket.socket, data: bytes) -> None:
        self.splicer.pair(client, upstream, data)


if __name__ == "__main__":
    Forwarder(int(sys.argv[1]), int(sys.argv[2])).run()
