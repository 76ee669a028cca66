"""A steady load through nginx in which every request is accounted for; the restart tests and
bench/bench_nginx_restart.py measure with it.

`RecordingBackend` is an HTTP/1.1 backend on a loopback address that records the X-Request-ID of every request
it serves (a request served twice is recorded twice) and answers `/slow/<ms>` after that many milliseconds.

`SteadyLoad` runs client threads of three kinds against nginx's HTTP port:
- keep-alive: one persistent connection each, requests back to back;
- fresh: a new connection for every request;
- slow: a new connection for every request to /slow/<ms>, so that some are in flight at any moment;
and two probes that open a connection every 10 ms, to the HTTP port and to nginx's configuration socket.

Every request carries its own id. A request is lost unless a complete 200 response carrying its id comes back,
with one exception every HTTP client makes: a request sent on a reused keep-alive connection that the server
closed without answering anything is sent again on a new connection (RFC 9112 section 9.3.1). nginx closes idle
keep-alive connections whenever a worker shuts down, on every reload too. These are counted apart, and the
backend's record shows whether the first attempt had been served after all (`served_twice`).
"""
from __future__ import annotations

import http.client
import itertools
import json
import socket
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

CLIENT_TIMEOUT_SECONDS = 15.0
PROBE_INTERVAL_SECONDS = 0.01


class _RecordingHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: "_Server"

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        request_id = self.headers.get("X-Request-ID", "")
        if self.path.startswith("/slow/"):
            time.sleep(int(self.path.split("/")[2]) / 1000)
        self.server.record(request_id)
        body = json.dumps({"backend": self.server.name, "id": request_id}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024

    def __init__(self, name: str, address: tuple[str, int]) -> None:
        self.name = name
        self.served: list[str] = []
        self.lock = threading.Lock()
        super().__init__(address, _RecordingHandler)

    def record(self, request_id: str) -> None:
        with self.lock:
            self.served.append(request_id)


class RecordingBackend:
    """An HTTP backend on `ip`, recording the id of every request it serves."""

    def __init__(self, name: str, ip: str) -> None:
        self.server = _Server(name, (ip, 0))
        self.ip, self.port = self.server.server_address[:2]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def served(self) -> Counter:
        with self.server.lock:
            return Counter(self.server.served)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Outcome:
    """What the clients saw."""
    ok: list[str] = field(default_factory=list)  # ids answered 200 with their own id
    lost: list[tuple[str, str]] = field(default_factory=list)  # (id, what went wrong)
    keepalive_resends: list[str] = field(default_factory=list)  # ids sent again after an unanswered close
    latencies: list[tuple[str, float, float]] = field(default_factory=list)  # (kind, start, seconds to answer)
    probe_failures: list[tuple[str, str]] = field(default_factory=list)  # (probe, error)
    probe_connects: int = 0
    probe_longest: float = 0.0
    new_connections: int = 0

    def longest_wait(self, *kinds: str) -> float:
        """The longest time a request (of these kinds, default all) took to be answered, retries included."""
        return max((seconds for kind, _, seconds in self.latencies if not kinds or kind in kinds), default=0.0)

    def summary(self) -> str:
        return (f"{len(self.ok)} answered, {len(self.lost)} lost, {len(self.keepalive_resends)} re-sent after a "
                f"keep-alive close, {self.new_connections} new connections, longest wait "
                f"{self.longest_wait('keepalive', 'fresh') * 1000:.0f} ms ({self.longest_wait('slow') * 1000:.0f} ms "
                f"for a slow one); probes: {self.probe_connects} connects, {len(self.probe_failures)} failed, "
                f"longest {self.probe_longest * 1000:.0f} ms")


class _Reused(Exception):
    """A reused keep-alive connection was closed before any byte of the answer came back."""


class SteadyLoad:
    """Client threads against nginx at 127.0.0.1:`port` for `host`; start(), then stop() returns the Outcome."""

    def __init__(self, port: int, host: str, *, config_socket: Path | None = None, keepalive: int = 3,
                 fresh: int = 2, slow: int = 2, slow_ms: int = 600) -> None:
        self.port, self.host, self.config_socket = port, host, config_socket
        self.counts = {"keepalive": keepalive, "fresh": fresh, "slow": slow}
        self.slow_ms = slow_ms
        self.outcome = Outcome()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ids = itertools.count()
        self.run_id = uuid.uuid4().hex[:8]  # in every request id: several loads may share a backend
        self._threads: list[threading.Thread] = []

    def start(self) -> "SteadyLoad":
        for kind, count in self.counts.items():
            for n in range(count):
                self._threads.append(threading.Thread(target=self._client, args=(kind, n), daemon=True))
        self._threads.append(threading.Thread(target=self._probe, args=("tcp",), daemon=True))
        if self.config_socket is not None:
            self._threads.append(threading.Thread(target=self._probe, args=("config socket",), daemon=True))
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> Outcome:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=CLIENT_TIMEOUT_SECONDS + 5)
        return self.outcome

    # clients

    def _client(self, kind: str, n: int) -> None:
        conn: http.client.HTTPConnection | None = None
        path = f"/slow/{self.slow_ms}" if kind == "slow" else "/"
        while not self._stop.is_set():
            request_id = f"{self.run_id}-{kind}-{n}-{next(self._ids)}"
            started = time.monotonic()
            try:
                if kind == "keepalive":
                    try:
                        if conn is None:
                            conn = self._connect()
                            reused = False
                        else:
                            reused = True
                        body = self._exchange(conn, path, request_id, reused, keep_alive=True)
                    except _Reused:
                        self._note("keepalive_resends", request_id)
                        conn.close()
                        conn = self._connect()
                        body = self._exchange(conn, path, request_id, False, keep_alive=True)
                else:
                    fresh = self._connect()
                    try:
                        body = self._exchange(fresh, path, request_id, False, keep_alive=False)
                    finally:
                        fresh.close()
                answer = json.loads(body)
                if answer.get("id") != request_id:
                    raise ValueError(f"answered with id {answer.get('id')!r}")
            except Exception as err:  # anything else is a lost request, whatever it was
                if conn is not None:
                    conn.close()
                    conn = None
                with self._lock:
                    self.outcome.lost.append((request_id, f"{type(err).__name__}: {err}"))
                continue
            with self._lock:
                self.outcome.ok.append(request_id)
                self.outcome.latencies.append((kind, started, time.monotonic() - started))
        if conn is not None:
            conn.close()

    def _connect(self) -> http.client.HTTPConnection:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=CLIENT_TIMEOUT_SECONDS)
        conn.connect()
        with self._lock:
            self.outcome.new_connections += 1
        return conn

    def _exchange(self, conn: http.client.HTTPConnection, path: str, request_id: str, reused: bool, *,
                  keep_alive: bool) -> bytes:
        headers = {"Host": self.host, "X-Request-ID": request_id}
        if not keep_alive:
            headers["Connection"] = "close"
        try:
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as err:
            if reused:
                raise _Reused() from err
            raise
        body = response.read()
        if response.status != 200:
            raise ValueError(f"status {response.status}: {body[:100]!r}")
        return body

    def _note(self, what: str, request_id: str) -> None:
        with self._lock:
            getattr(self.outcome, what).append(request_id)

    # probes: a connect must succeed at every moment

    def _probe(self, which: str) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if which == "tcp":
                    sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                else:
                    sock = socket.socket(socket.AF_UNIX)
                    sock.settimeout(5)
                    sock.connect(str(self.config_socket))
                sock.close()
                with self._lock:
                    self.outcome.probe_connects += 1
                    self.outcome.probe_longest = max(self.outcome.probe_longest, time.monotonic() - started)
            except OSError as err:
                with self._lock:
                    self.outcome.probe_failures.append((which, f"{type(err).__name__}: {err}"))
            time.sleep(PROBE_INTERVAL_SECONDS)


def served_twice(backend: RecordingBackend, load: SteadyLoad) -> list[str]:
    """Ids of this load that the backend served more than once."""
    return [request_id for request_id, times in backend.served().items()
            if times > 1 and request_id.startswith(load.run_id + "-")]


def answered_but_not_served_once(backend: RecordingBackend, load: SteadyLoad) -> list[str]:
    """Ids of this load answered 200 that the backend did not serve exactly once."""
    served = backend.served()
    return [request_id for request_id in load.outcome.ok if served[request_id] != 1]
