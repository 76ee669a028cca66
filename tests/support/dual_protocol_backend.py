"""A backend that speaks HTTP and HTTPS on one port (a thread in the test process), for backend-protocol
AUTO_HTTP: a connection whose first byte is a TLS handshake record is served over TLS (a self-signed
certificate made with the openssl CLI), any other as plain HTTP. The JSON answer says which scheme the request
came over, and the SNI of a TLS one."""
from __future__ import annotations

import json
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

_TLS_HANDSHAKE = b"\x16"


class _SchemeHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the base class's naming
        tls = isinstance(self.request, ssl.SSLSocket)
        body = json.dumps({"scheme": "https" if tls else "http", "sni": self.server.sni_seen.get(id(self.request)),
                           "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class DualProtocolBackend(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, host: str, directory: Path) -> None:
        super().__init__((host, 0), _SchemeHandler)
        pem = directory / "dual-protocol.pem"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                        "-nodes", "-keyout", str(pem), "-out", str(pem.with_suffix(".crt")), "-days", "2",
                        "-subj", "/CN=dual protocol backend"], check=True, capture_output=True)
        pem.write_text(pem.with_suffix(".crt").read_text() + pem.read_text())
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(pem)
        self.sni_seen: dict[int, str | None] = {}
        self.context.sni_callback = self._remember_sni

    def _remember_sni(self, sock: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        self._last_sni = name

    def get_request(self) -> tuple[socket.socket, Any]:
        connection, address = self.socket.accept()
        connection.settimeout(5)
        if connection.recv(1, socket.MSG_PEEK) == _TLS_HANDSHAKE:
            self._last_sni = None
            connection = self.context.wrap_socket(connection, server_side=True)
            self.sni_seen[id(connection)] = self._last_sni
        return connection, address

    @property
    def port(self) -> int:
        return self.server_address[1]


def running_dual_protocol_backend(host: str, directory: Path) -> Iterator[DualProtocolBackend]:
    """A started DualProtocolBackend on `host`, shut down when the generator is closed (a fixture's body)."""
    server = DualProtocolBackend(host, directory)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()
