"""Small HTTP servers the tests run in threads of their own (backends, auth services): started once, here."""
from __future__ import annotations

import contextlib
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler], address: tuple[str, int] = ("127.0.0.1", 0), *,
            tls: ssl.SSLContext | None = None,
            server_class: type[ThreadingHTTPServer] = ThreadingHTTPServer) -> Iterator[ThreadingHTTPServer]:
    """A `server_class` for `handler` on `address` (port 0: any free one), over TLS with `tls`, answering in a
    thread until the block ends."""
    server = server_class(address, handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def port_of(server: ThreadingHTTPServer) -> int:
    return server.server_address[1]
