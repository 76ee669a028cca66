"""The splicer on socket pairs: what reaches each end, and a pair whose upstream is gone before the first write."""
import select
import socket

from services.proxy.splice import Splicer


class Loop:
    """The part of the proxy's event loop the splicer uses: an epoll set, its handlers, the deferred closes."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self.handlers: dict[int, object] = {}
        self.closed: list = []
        self.pairs_closed = 0
        self.splicer = Splicer(self.epoll, self.handlers, self.close_later, self.pair_closed)

    def close_later(self, fd, side) -> None:
        del self.handlers[fd]
        self.closed.append(side)

    def pair_closed(self, side) -> None:
        self.pairs_closed += 1

    def run_once(self) -> None:
        for fd, events in self.epoll.poll(1):
            if fd in self.handlers:
                self.handlers[fd].on_event(events)
        for side in self.closed:
            side.sock.close()
        self.closed.clear()


def connections(loop: Loop) -> tuple[socket.socket, socket.socket, socket.socket, socket.socket]:
    """(client, its far end, upstream, its far end): the proxy's two sockets are on the loop's epoll set."""
    ends = []
    for _ in range(2):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        loop.epoll.register(ours.fileno(), 0)
        ends += [ours, theirs]
    return tuple(ends)


def test_first_bytes_go_upstream_and_replies_come_back():
    loop = Loop()
    client, client_end, upstream, upstream_end = connections(loop)
    loop.splicer.pair(client, upstream, b"hello")
    assert upstream_end.recv(100) == b"hello"
    upstream_end.sendall(b"reply")
    loop.run_once()
    assert client_end.recv(100) == b"reply"


def test_an_upstream_gone_before_the_first_write_closes_the_pair():
    loop = Loop()
    client, client_end, upstream, upstream_end = connections(loop)
    upstream_end.close()  # the first write fails (EPIPE)
    client_side = loop.splicer.pair(client, upstream, b"hello")
    assert client_side.fd < 0 and loop.pairs_closed == 1 and loop.handlers == {}
    loop.run_once()
    client_end.settimeout(5)
    assert client_end.recv(100) == b""  # the client sees its connection closed
