"""Real parts for the proxy's integration tests (and its benchmark): certificates made with the openssl
CLI, TLS backends, a real nginx, the passthrough table published with a real ClonePublisher, and
`pyngress proxy` processes."""
from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any, Callable

import zmq.asyncio

from proto import endpoints
from services.common.clone import ClonePublisher
from services.common.files import ensure_private_dir
from services.nginxconf.paths import NginxPaths
from tests.unit.proxy.hello_bytes import first_flight
from tests.support.net import free_port  # noqa: F401 - the proxy tests import it from here

REPO = Path(__file__).resolve().parents[3]
PASS_HOST = "pass.proxy.test"
OTHER_HOST = "other.proxy.test"




def wait_for(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def accepts(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def wait_listening(port: int, timeout: float = 10.0) -> None:
    wait_for(lambda: accepts(port), timeout, what=f"a listener on port {port}")


# --- certificates ---------------------------------------------------------------------------------

class Pki:
    """A CA and server certificates (EC P-256, for cheap handshakes) issued with the openssl CLI."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.ca = directory / "ca.crt"
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", directory / "ca.key", "-out", self.ca, "-days", "2", "-subj", "/CN=pyngress test CA")

    def issue(self, name: str, dns_names: list[str]) -> tuple[Path, Path]:
        key, csr, crt = self.dir / f"{name}.key", self.dir / f"{name}.csr", self.dir / f"{name}.crt"
        ext = self.dir / f"{name}.ext"
        ext.write_text("subjectAltName=" + ",".join(f"DNS:{n}" for n in dns_names) + "\n")
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                      "-keyout", key, "-out", csr, "-subj", f"/CN={name}")
        self._openssl("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.dir / "ca.key",
                      "-CAcreateserial", "-out", crt, "-days", "2", "-extfile", ext)
        os.chmod(key, 0o644)  # nginx workers (nobody) never read it, but a benchmark nginx may run as one
        return crt, key

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    @staticmethod
    def _openssl(*args: Any) -> None:
        subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def subject_cn(cert: dict[str, Any]) -> str:
    return dict(item[0] for item in cert["subject"])["commonName"]


# --- TLS backends ---------------------------------------------------------------------------------

class ThreadedServer:
    """A listener on 127.0.0.1 that serves each connection on a thread of its own (`_serve`)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=512)
        self.port = self.listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self.accepted = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return  # closed
            self.accepted += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self.listener.close()


class TcpEcho(ThreadedServer):
    """A plain TCP backend that sends back every byte it gets, in reads of random sizes, then EOF."""

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(random.choice([1, 1000, 300_000])):
                conn.sendall(data)
            conn.shutdown(socket.SHUT_WR)


class TlsBackend(ThreadedServer):
    """A TLS server thread: greets each client with its name, echoes lines, and after the client's EOF
    reports how many bytes it got (so a half-close can be observed end to end)."""

    def __init__(self, name: str, cert: Path, key: Path) -> None:
        self.name = name
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        # A TCP half-close from the client is a "ragged" EOF to OpenSSL; let the backend answer after it.
        self.ctx.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
        super().__init__()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with self.ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(f"{self.name}\n".encode())
                received = 0
                while data := tls.recv(65536):
                    received += len(data)
                    tls.sendall(data)
                tls.sendall(f"{self.name} saw EOF after {received} bytes\n".encode())
        except (OSError, ssl.SSLError):
            pass


class TlsClient:
    """A TLS client over a plain socket through memory BIOs, so a test decides how the first flight
    (the ClientHello) is cut into segments or records, and can half-close the TCP connection."""

    def __init__(self, port: int, ctx: ssl.SSLContext, server_name: str | None, prefix: bytes = b"") -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_hostname=server_name)
        self.prefix = prefix
        self.buffer = b""

    def handshake(self, send_hello: Callable[[socket.socket, bytes], None] | None = None) -> TlsClient:
        hello = self.prefix + first_flight(self.tls, self.outgoing)
        (send_hello or socket.socket.sendall)(self.sock, hello)
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self._flush()
                self._pull()
        self._flush()
        return self

    def peer_cn(self) -> str:
        return subject_cn(self.tls.getpeercert())

    def send(self, data: bytes) -> None:
        self.tls.write(data)
        self._flush()

    def read_line(self) -> bytes:
        while b"\n" not in self.buffer:
            self.buffer += self._read_some()
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def read_all(self) -> bytes:
        """Everything until the server closes."""
        while True:
            try:
                chunk = self._read_some()
            except (ConnectionError, ssl.SSLError):
                break
            if not chunk:
                break
            self.buffer += chunk
        data, self.buffer = self.buffer, b""
        return data

    def shutdown_write(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)

    def _read_some(self) -> bytes:
        while True:
            try:
                return self.tls.read(65536)
            except ssl.SSLWantReadError:
                self._pull()
            except ssl.SSLZeroReturnError:
                return b""

    def _pull(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            self.incoming.write_eof()
            raise ConnectionError("server closed the connection")
        self.incoming.write(data)

    def _flush(self) -> None:
        data = self.outgoing.read()
        if data:
            self.sock.sendall(data)

    def close(self) -> None:
        self.sock.close()


def https_get(port: int, ctx: ssl.SSLContext, server_name: str | None, prefix: bytes = b"") -> tuple[str, str]:
    """GET / through the proxy; returns (certificate CN, response body)."""
    client = TlsClient(port, ctx, server_name, prefix).handshake()
    try:
        client.send(f"GET / HTTP/1.1\r\nHost: {server_name or 'none'}\r\nConnection: close\r\n\r\n".encode())
        response = client.read_all().decode()
        return client.peer_cn(), response.split("\r\n\r\n", 1)[1]
    finally:
        client.close()


def closed_by_peer(sock: socket.socket, timeout: float = 10.0) -> bool:
    """True once the other end has closed or reset `sock` (any data before that is discarded)."""
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


# --- nginx ----------------------------------------------------------------------------------------

class Nginx:
    """A real nginx master in the foreground, with a config written by the test."""

    def __init__(self, directory: Path, body: str) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o755)
        conf = directory / "nginx.conf"
        conf.write_text(f"""
daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log info;
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
events {{ worker_connections 4096; }}
{body}
""")
        subprocess.run(["nginx", "-t", "-q", "-p", str(directory), "-c", str(conf)], check=True)
        # Sessions of their own, as a whole controller has (tests/support/controller.py): under the kernel's
        # autogroup scheduling each session gets an equal share of the CPUs, and the passthrough benchmark
        # compares this nginx with pyngress's proxy on equal terms.
        self.proc = subprocess.Popen(["nginx", "-p", str(directory), "-c", str(conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def worker_pids(self) -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGQUIT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def http_temp_paths(directory: Path) -> str:
    return "".join(f"{kind}_temp_path {directory}/{kind};\n"
                   for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))


# --- the passthrough table ------------------------------------------------------------------------

class TablePublisher:
    """The syncer's side of the passthrough table: a real ClonePublisher on the syncer's endpoints,
    run on its own event loop thread."""

    def __init__(self, run_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.ctx = zmq.asyncio.Context()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.publisher: ClonePublisher = self._call(self._start(run_dir))

    async def _start(self, run_dir: Path) -> ClonePublisher:
        publisher = ClonePublisher(self.ctx, updates_endpoint=endpoints.syncer_updates(run_dir),
                                   snapshot_endpoint=endpoints.syncer_snapshot(run_dir))
        self._serve = asyncio.ensure_future(publisher.serve())
        return publisher

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(10)

    def set(self, key: str, value: Any) -> int:
        self._call(self.publisher.set(key, value))
        return self.publisher.seq

    def replace_all(self, state: dict[str, Any]) -> int:
        self._call(self.publisher.replace_all(state))
        return self.publisher.seq

    def close(self) -> None:
        async def stop() -> None:
            self._serve.cancel()
            self.publisher.close()
        self._call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.ctx.term()


# --- proxy processes ------------------------------------------------------------------------------

def nginx_tls_socket(run_dir: Path) -> Path:
    """Where `pyngress proxy --run-dir=<run_dir>` connects to nginx's TLS listener; its directory is made."""
    path = NginxPaths.of(run_dir.parent / "state", run_dir).passthrough_tls_socket
    ensure_private_dir(path.parent)
    return path


class ProxyProcess:
    """`pyngress proxy` as a real process."""

    def __init__(self, https_port: int, run_dir: Path, env: dict[str, str] | None = None,
                 log_path: Path | None = None, python: str | None = None) -> None:
        """`python`: another interpreter to run it on (the venv's packages on its path), as the benchmark's
        --python does; by default the venv's own `pyngress`."""
        self.run_dir = run_dir
        self.log_path = log_path or run_dir / f"proxy-{time.monotonic_ns()}.log"
        self.log = open(self.log_path, "wb")
        entry = [str(REPO / ".venv/bin/pyngress")]
        if python is not None:
            entry = [python, "-c", "from services.cli import main; main()"]
            env = {"PYTHONPATH": python_path(), **(env or {})}
        # It hands connections for nginx to nginx_tls_socket(run_dir).
        command = [*entry, "proxy", f"--https-port={https_port}", f"--run-dir={run_dir}", "--log-level=info"]
        self.proc = subprocess.Popen(command, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **(env or {})}, start_new_session=True)  # as Nginx
        self.status_path = run_dir / "status" / f"proxy-{self.proc.pid}.json"

    def status(self) -> dict[str, Any]:
        try:
            return json.loads(self.status_path.read_text())
        except (OSError, ValueError):
            return {}

    def wait_serving(self, table_seq: int = 0) -> ProxyProcess:
        def ready() -> bool:
            if self.proc.poll() is not None:
                raise RuntimeError(f"proxy exited with {self.proc.returncode}: {self.log_path.read_text()}")
            status = self.status()
            return status.get("state") == "serving" and status.get("table_seq", -1) >= table_seq
        wait_for(ready, what=f"proxy {self.proc.pid} serving table seq {table_seq}")
        return self

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def python_path() -> str:
    """PYTHONPATH for another Python 3.11 interpreter to import pyngress and the venv's packages (the same minor
    version: their compiled modules fit)."""
    return os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])


def cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process in seconds, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / ticks, int(fields[12]) / ticks

