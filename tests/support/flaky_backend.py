"""A backend that fails on demand, as the Gateway API conformance suite's echo server simulates retries and slow
answers, driven by the request's query:

- `delay=300ms`: wait that long before sending the status line (a slow backend, for timeouts);
- `uuid=<id>&succeedAfter=N`: the first N requests of that id fail, the next ones succeed; a failure answers
  `responseCode` (500, 503, ...) or, without one, resets the connection before any answer (a connection error);
  `delayRetry=100ms`: each failure waits that long first.

A success answers 200 with JSON: {"attempt": <this request's number for its id>, "protocol": ...}; `attempts(id)`
says how many requests of an id arrived, so a test sees how many tries the proxy made.
"""
from __future__ import annotations

import contextlib
import json
import re
import socket
import struct
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator
from urllib.parse import parse_qs, urlsplit

from tests.support.http_servers import serving

_DURATION = re.compile(r"([0-9.]+)(ms|s)")


def seconds(value: str) -> float:
    number, unit = _DURATION.fullmatch(value).groups()  # type: ignore[union-attr]
    return float(number) / (1000 if unit == "ms" else 1)


class FlakyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def attempts(self, uuid: str) -> int:
        with self.lock:
            return self.seen[uuid]


class FlakyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as nginx's upstream connections are
    server: FlakyServer
    _reset = False

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        query = {k: v[-1] for k, v in parse_qs(urlsplit(self.path).query).items()}
        uuid = query.get("uuid", "")
        with self.server.lock:
            self.server.seen[uuid] += 1
            attempt = self.server.seen[uuid]
        failing = uuid and attempt <= int(query.get("succeedAfter", "0"))
        delay = query.get("delayRetry") if failing else query.get("delay")
        if delay:
            time.sleep(seconds(delay))
        if failing and "responseCode" not in query:
            self._reset_connection()
            return
        status = int(query["responseCode"]) if failing else 200
        body = json.dumps({"attempt": attempt, "protocol": self.request_version, "path": self.path}).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:  # the proxy gave up waiting (its timeout) and closed the connection
            self.close_connection = True

    def _reset_connection(self) -> None:
        """Close with a TCP RST (SO_LINGER 0) before any answer: what the proxy sees as a connection error."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._reset = True
        self.close_connection = True

    def finish(self) -> None:
        if self._reset:
            self.rfile.close()
            self.wfile.close()
            self.connection.close()
            return
        with contextlib.suppress(OSError):
            super().finish()


@contextlib.contextmanager
def flaky_backend(host: str = "127.0.0.1") -> Iterator[FlakyServer]:
    """The flaky backend on `host` (any free port), answering until the block ends."""
    with serving(FlakyHandler, (host, 0), server_class=FlakyServer) as server:
        yield server  # type: ignore[misc]
