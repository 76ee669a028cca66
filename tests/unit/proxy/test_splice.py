"""The splicer on socket pairs: what reaches each end, and a pair whose upstream is gone before the first write."""
import select
import socket

from services.proxy.splice import EPOLLIN, READ_EVENTS, READ_SIZE, READ_WRITE_EVENTS, Splicer


class Loop:
    """The part of the proxy's event loop the splicer uses: an epoll set, its handlers, the deferred closes and
    the handlers to run again."""

    def __init__(self) -> None:
        self.epoll = select.epoll()
        self.handlers: dict[int, object] = {}
        self.closed: list = []
        self.again: list = []
        self.pairs_closed = 0
        self.splicer = Splicer(self, self.pair_closed)

    def close_later(self, fd, side) -> None:
        del self.handlers[fd]
        self.closed.append(side)

    def ready(self, side) -> None:
        self.again.append(side)

    def pair_closed(self, side) -> None:
        self.pairs_closed += 1

    def run_once(self, timeout: float = 1) -> None:
        for fd, events in self.epoll.poll(timeout):
            if fd in self.handlers:
                self.handlers[fd].on_event(events)
        again, self.again = self.again, []
        for side in again:
            if side.fd >= 0:
                side.on_event(EPOLLIN)
        for side in self.closed:
            side.sock.close()
        self.closed.clear()


def connections(loop: Loop) -> tuple[socket.socket, socket.socket, socket.socket, socket.socket]:
    """(client, its far end, upstream, its far end): the proxy's two sockets are on the loop's epoll set, registered
    as the splicer expects."""
    ends = []
    for events in (READ_EVENTS, READ_WRITE_EVENTS):
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        loop.epoll.register(ours.fileno(), events)
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


def received(loop: Loop, end: socket.socket, size: int) -> bytes:
    """Run the loop until `size` bytes have reached `end`, or nothing has for a second."""
    end.setblocking(False)
    data = bytearray()
    quiet = 0
    while len(data) < size and quiet < 20:
        loop.run_once(0.05)
        before = len(data)
        try:
            while chunk := end.recv(1 << 20):
                data += chunk
        except BlockingIOError:
            pass
        quiet = quiet + 1 if len(data) == before else 0
    return bytes(data)


def test_more_than_one_read_arriving_at_once_is_all_forwarded():
    """Edge-triggered: a read that fills the buffer is not reported again by epoll; the splicer must read on."""
    loop = Loop()
    client, client_end, upstream, upstream_end = connections(loop)
    for sock in (upstream_end, client):  # the senders: one arrival, then one send, of several reads' worth
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * READ_SIZE)
    loop.splicer.pair(client, upstream, b"")
    payload = bytes(range(256)) * (3 * READ_SIZE // 256 + 7)
    upstream_end.setblocking(False)
    sent = upstream_end.send(payload)  # as much as the socket holds, in one arrival
    assert sent > READ_SIZE
    assert received(loop, client_end, sent) == payload[:sent]


def test_a_full_reader_holds_the_sender_back_and_gets_everything_once_it_reads():
    loop = Loop()
    client, client_end, upstream, upstream_end = connections(loop)
    loop.splicer.pair(client, upstream, b"")
    payload = bytes(range(251)) * 40_000  # 10 MB: far more than the socket buffers hold
    upstream_end.setblocking(False)
    sent = 0
    for _ in range(200):  # the client's end reads nothing yet
        try:
            sent += upstream_end.send(payload[sent:])
        except BlockingIOError:
            pass
        loop.run_once(0.01)
    assert sent < len(payload)  # held back: the proxy buffers at most one read per direction
    data = bytearray()
    client_end.setblocking(False)
    for _ in range(100_000):
        if sent < len(payload):
            try:
                sent += upstream_end.send(payload[sent:])
            except BlockingIOError:
                pass
        loop.run_once(0)
        try:
            while chunk := client_end.recv(1 << 20):
                data += chunk
        except BlockingIOError:
            pass
        if len(data) == len(payload):
            break
    assert bytes(data) == payload


def test_data_and_eof_arriving_together_are_both_passed_on():
    loop = Loop()
    client, client_end, upstream, upstream_end = connections(loop)
    loop.splicer.pair(client, upstream, b"hello")
    upstream_end.sendall(b"last words")
    upstream_end.shutdown(socket.SHUT_WR)
    assert received(loop, client_end, 10) == b"last words"
    client_end.settimeout(5)
    assert client_end.recv(100) == b""  # the EOF followed, with no further event to report it
    client_end.sendall(b"still heard")  # half-close: the other direction keeps flowing
    assert received(loop, upstream_end, 16) == b"hellostill heard"


def test_bytes_that_arrived_before_the_pair_are_forwarded_when_their_event_is_passed_on():
    """The proxy reads the ClientHello before connecting upstream; what the client sends meanwhile was reported
    to the proxy (its edge is gone) and is handed to the splicer as missed events."""
    loop = Loop()
    client, client_end, upstream, upstream_end = connections(loop)
    client_end.sendall(b" and more")
    loop.epoll.poll(0)  # the edge is reported here, before the pair exists
    loop.splicer.pair(client, upstream, b"hello", client_missed=EPOLLIN)
    assert received(loop, upstream_end, 14) == b"hello and more"
