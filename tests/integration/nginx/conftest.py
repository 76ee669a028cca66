"""Real nginx started through `pyngress nginx`, real HTTP echo backends, real TLS clients."""
from __future__ import annotations

import asyncio
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from services.nginxconf import processes
from services.nginxconf.config import LocationProfile, NginxConfig
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import make_self_signed
from services.nginxconf.reload import NginxReloader
from services.nginxconf.render import render
from services.nginxconf.tables import TablePusher
from services.syncer.model.types import HostRoutes, Route
from tests.support.net import free_port

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT = 20.0




def eventually(check: Callable[[], Any], timeout: float = START_TIMEOUT) -> Any:
    """Retry `check` until it returns something truthy without failing an assertion."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
            if result:
                return result
        except (AssertionError, OSError):
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"{check} did not succeed within {timeout}s")
        time.sleep(0.05)


# --- echo backends ------------------------------------------------------------------------------

class _EchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as nginx's upstream keepalive expects

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        received = 0
        while received < length:
            chunk = self.rfile.read(min(65536, length - received))
            if not chunk:
                break
            received += len(chunk)
        if self.path.startswith("/big/"):
            body = b"x" * int(self.path.split("/")[2])
            content_type = "application/octet-stream"
        else:
            body = json.dumps({"backend": self.server.name, "method": self.command, "path": self.path,
                               "headers": {k.lower(): v for k, v in self.headers.items()},
                               "body_length": received}).encode()
            content_type = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, name: str, family: int) -> None:
        self.address_family = family
        self.name = name
        super().__init__(("::1" if family == socket.AF_INET6 else "127.0.0.1", 0), _EchoHandler)


@dataclass
class EchoBackend:
    name: str
    server: _Server

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@pytest.fixture(scope="module")
def echo() -> Iterator[Callable[[str], EchoBackend]]:
    """echo(name, family=AF_INET) starts an HTTP backend that answers with its name and what it received."""
    started: list[_Server] = []

    def start(name: str, family: int = socket.AF_INET) -> EchoBackend:
        server = _Server(name, family)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(server)
        return EchoBackend(name, server)

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def closed_endpoint() -> str:
    """An address where nothing listens: connections are refused."""
    return f"127.0.0.1:{free_port()}"


# --- nginx --------------------------------------------------------------------------------------

@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes
    peer_subject: str | None = None  # CN of the certificate nginx served (https only)

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)

    @property
    def backend(self) -> str | None:
        return self.json["backend"] if self.headers.get("content-type") == "application/json" else None


@dataclass
class Nginx:
    """One nginx instance with its own directories and ports, run by the launcher."""
    base: Path
    http_port: int = field(default_factory=free_port)
    https_port: int = field(default_factory=free_port)
    status_port: int = field(default_factory=free_port)
    ssl_passthrough_proxy_port: int = field(default_factory=free_port)
    healthz_port: int = field(default_factory=free_port)
    ssl_passthrough: bool = False
    process: subprocess.Popen | None = None
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.state_dir = self.base / "state"
        self.run_dir = self.base / "run"
        self.paths = NginxPaths.of(self.state_dir, self.run_dir)
        self.log_path = self.base / "nginx.log"
        self.loop = asyncio.new_event_loop()
        self.reloader = NginxReloader(self.paths, reload_timeout=20)
        self.pusher = TablePusher(self.paths)

    # lifecycle

    def launcher_command(self) -> list[str]:
        return [sys.executable, "-m", "services.cli", "nginx", f"--state-dir={self.state_dir}",
                f"--run-dir={self.run_dir}", f"--http-port={self.http_port}", f"--https-port={self.https_port}",
                f"--status-port={self.status_port}", f"--ssl-passthrough-proxy-port={self.ssl_passthrough_proxy_port}",
                f"--healthz-port={self.healthz_port}", f"--enable-ssl-passthrough={str(self.ssl_passthrough).lower()}"]

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.launcher_command(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        try:
            eventually(self._healthy)
        except AssertionError:
            raise AssertionError(f"nginx did not become ready; its log:\n{self.log()}") from None

    def _healthy(self) -> bool:
        if self.process and self.process.poll() is not None:
            raise AssertionError(f"the launcher exited with {self.process.returncode}:\n{self.log()}")
        # The launcher execs nginx: ready once its pid is the master's (a previous one's workers may answer).
        master = processes.running_master(self.paths.prefix, self.paths.pid_file)
        if not master or master.pid != self.process.pid:
            return False
        return self.api("GET", "/healthz").status == 200

    def api(self, method: str, path: str, body: bytes | None = None) -> Response:
        """One request to nginx's configuration socket, as the syncer makes them."""
        conn = UnixHTTPConnection(self.paths.config_socket)
        try:
            conn.request(method, path, body=body)
            response = conn.getresponse()
            return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
        finally:
            conn.close()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-5000:]

    def master_pid(self) -> int:
        master = processes.running_master(self.paths.prefix, self.paths.pid_file)
        assert master, "no nginx master is running"
        return master.pid

    def worker_pids(self) -> set[int]:
        return {w.pid for w in processes.workers_of(self.master_pid(), self.paths.prefix)
                if w.title == "nginx: worker process"}

    def kill_master(self) -> None:
        os.kill(self.master_pid(), signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        master = processes.running_master(self.paths.prefix, self.paths.pid_file)
        if master:
            os.kill(master.pid, signal.SIGQUIT)
        if self.process:
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        processes.stop_stale(self.paths.prefix, grace_seconds=2)

    def close(self) -> None:
        self.stop()
        self.loop.close()

    # configuration

    def config(self, profiles: list[LocationProfile] | None = None, globals_: dict[str, str] | None = None,
               **overrides: Any) -> NginxConfig:
        values = dict(http_port=self.http_port, https_port=self.https_port, state_dir=str(self.state_dir), run_dir=str(self.run_dir), profiles=profiles or [],
                      globals=globals_ or {}, ssl_passthrough=self.ssl_passthrough)
        values.update(overrides)
        return NginxConfig(**values)

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def apply(self, config: NginxConfig) -> bool:
        return self.run(self.reloader.apply(render(config)))

    def push(self, routes: dict[str, HostRoutes], backends: dict[str, list[str]] | None = None,
             certificates: dict[str, Any] | None = None) -> list[str]:
        return self.run(self.pusher.push(routes={h: r.to_json() for h, r in routes.items()}, backends=backends or {},
                                         certificates=certificates or {}))

    # requests

    def get(self, path: str, host: str = "example.test", method: str = "GET", body: bytes | None = None,
            headers: dict[str, str] | None = None, https: bool = False, sni: str | None = None,
            port: int | None = None, source: str | None = None) -> Response:
        """One request on a new connection (so that nginx's worker is chosen afresh), from the loopback
        address `source` (127.0.0.x) when given."""
        sock = socket.create_connection(("127.0.0.1", port or (self.https_port if https else self.http_port)),
                                        timeout=10, source_address=(source, 0) if source else None)
        subject = None
        if https:
            sock = client_tls_context().wrap_socket(sock, server_hostname=sni)
            subject = common_name(sock.getpeercert())
        conn = http.client.HTTPConnection("127.0.0.1", timeout=10)
        conn.sock = sock
        try:
            conn.request(method, path, body=body, headers={"Host": host, **(headers or {})})
            response = conn.getresponse()
            return Response(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read(),
                            subject)
        finally:
            conn.close()


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket (nginx's configuration API listens on one)."""

    def __init__(self, path: Path, timeout: float = 10) -> None:
        super().__init__("nginx", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(self.timeout)
        self.sock.connect(str(self.socket_path))


def route(backend: str | None, profile: str = "default") -> Route:
    return Route(backend=backend, profile=profile, ingress="default/test")


@pytest.fixture
def nginx_factory() -> Iterator[Callable[..., Nginx]]:
    """nginx_factory(**options) starts an nginx instance; all are stopped after the test."""
    started: list[Nginx] = []
    bases: list[Path] = []

    def start(**options: Any) -> Nginx:
        # Not under pytest's tmp_path: its parents are 0700, and nginx's workers (user nobody) must
        # reach the temp directories inside the state dir.
        base = Path(tempfile.mkdtemp(prefix="pyngress-nginx-test-", dir="/tmp"))
        os.chmod(base, 0o711)
        bases.append(base)
        instance = Nginx(base, **options)
        started.append(instance)
        instance.start()
        return instance

    yield start
    for instance in started:
        instance.close()
    for base in bases:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def shared_nginx() -> Iterator[Nginx]:
    """One instance for a whole test module; each test pushes the whole tables it needs."""
    base = Path(tempfile.mkdtemp(prefix="pyngress-nginx-test-", dir="/tmp"))
    os.chmod(base, 0o711)
    instance = Nginx(base)
    try:
        instance.start()
        yield instance
    finally:
        instance.close()
        shutil.rmtree(base, ignore_errors=True)


# --- TLS ----------------------------------------------------------------------------------------

_TRUSTED: list[str] = []  # PEM certificates


def client_tls_context() -> ssl.SSLContext:
    """Verifies against the test certificates (so the peer's subject is readable), not host names."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_REQUIRED
    context.load_verify_locations(cadata="".join(_TRUSTED))
    return context


def trust(path: Path) -> None:
    """Accept the certificate in `path` (a PEM, maybe with its key) in client_tls_context()."""
    text = path.read_text()
    _TRUSTED.append(text[:text.index(END_CERTIFICATE) + len(END_CERTIFICATE)] + "\n")


def common_name(peer: dict[str, Any]) -> str | None:
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


END_CERTIFICATE = "-----END CERTIFICATE-----"


@pytest.fixture(scope="session")
def make_certificate(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str, tuple[str, ...]], dict[str, str]]:
    """make_certificate(cn, dns_names) → {"cert": PEM, "key": PEM}, trusted by client_tls_context()."""
    directory = tmp_path_factory.mktemp("certs")
    counter = iter(range(10**6))

    def make(cn: str, dns_names: tuple[str, ...] = ()) -> dict[str, str]:
        pem = make_self_signed(f"/CN={cn}", dns_names or (cn.lstrip("*."),)).decode()
        path = directory / f"cert-{next(counter)}.pem"
        path.write_text(pem)
        trust(path)
        cert_end = pem.index(END_CERTIFICATE) + len(END_CERTIFICATE) + 1
        return {"cert": pem[:cert_end], "key": pem[cert_end:]}

    return make
