"""The least a Python TCP forwarder can do per connection: the floor under `pyngress proxy`'s CPU cost.

One process, one thread, a bare epoll loop: accept and read the first bytes with the relay module's accept_read (where
the proxy reads the ClientHello, this routes nothing), connect to the one backend without blocking, then hand the pair
to the proxy's own C relay (services/proxy/relay.py), as the proxy does. It parses nothing, keeps no timeouts, counters or table, and trusts
its clients. bench_passthrough.py --floor runs it as a fourth path beside the proxy and nginx, so that what the
proxy adds around the relay (the ClientHello, routing, timers, its thread beside asyncio) is measured in the same
run. (Until the relay, this floor copied in Python too: BENCHMARKS.md has its figures of then.)
Run: python bench/minimal_forwarder.py LISTEN_PORT BACKEND_PORT
"""
from __future__ import annotations

import _socket
import select
import socket
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from services.proxy.event_loop import EPOLLIN, READ_EVENTS, READ_SIZE, READ_WRITE_EVENTS  # noqa: E402
from services.proxy.relay import Relay  # noqa: E402


class Forwarder:
    def __init__(self, listen_port: int, backend_port: int) -> None:
        self.backend = ("127.0.0.1", backend_port)
        self.listener = socket.create_server(("127.0.0.1", listen_port), backlog=4096)
        self.listener.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.listener.setblocking(False)
        self.epoll = select.epoll()
        self.wait = self.epoll.poll
        self.relay = Relay(self)  # replaces self.wait with its own
        self.handlers: dict[int, Any] = {}
        self.epoll.register(self.listener.fileno(), EPOLLIN)

    def run(self) -> None:
        listener_fd, wait = self.listener.fileno(), self.wait
        while True:
            for fd, events in wait(-1.0, 512):
                if fd == listener_fd:
                    self.accept(listener_fd)
                    continue
                handler = self.handlers.get(fd)
                if isinstance(handler, tuple):
                    self.connected(fd, events, *handler)
                elif isinstance(handler, _socket.socket):
                    self.first_bytes(handler)

    def accept(self, listener_fd: int) -> None:
        accepted = self.relay.accept_read(listener_fd)  # as the proxy does: read at once (they are usually in)
        if accepted is None:
            return
        fd, data = accepted
        if data is None:
            self.handlers[fd] = _socket.socket(socket.AF_INET, socket.SOCK_STREAM, 0, fd)
            self.epoll.register(fd, READ_EVENTS)
        else:
            self.connect(fd, data)

    def first_bytes(self, client: _socket.socket) -> None:
        try:
            data = client.recv(READ_SIZE)
        except BlockingIOError:
            return
        self.handlers[client.fileno()] = True  # on the epoll set, read: the relay takes it from here
        self.connect(client.detach(), data)

    def connect(self, client_fd: int, data: bytes) -> None:
        upstream = _socket.socket(socket.AF_INET, socket.SOCK_STREAM | socket.SOCK_NONBLOCK)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        upstream.connect_ex(self.backend)  # EINPROGRESS: writable once connected
        self.handlers[upstream.fileno()] = (client_fd, upstream, data)
        self.epoll.register(upstream.fileno(), READ_WRITE_EVENTS)

    def connected(self, fd: int, events: int, client_fd: int, upstream: _socket.socket, data: bytes) -> None:
        del self.handlers[fd]
        client_on_set = self.handlers.pop(client_fd, None) is not None
        self.relay.add(client_fd, client_on_set, upstream.detach(), True, events & ~select.EPOLLOUT, data)


if __name__ == "__main__":
    Forwarder(int(sys.argv[1]), int(sys.argv[2])).run()
