"""A test certificate authority made with the openssl CLI, TLS Secrets, and TLS clients that report
which certificate the server presented."""
from __future__ import annotations

import base64
import http.client
import itertools
import json
import socket
import ssl
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Pair:
    cert: str  # PEM
    key: str   # PEM


class TestCA:
    """Issues leaf certificates signed by one throwaway CA (P-256 keys, valid two days)."""

    __test__ = False  # not a pytest test class

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._serial = itertools.count(1)
        self.cert_path = directory / "ca.crt"
        self._key_path = directory / "ca.key"
        self._openssl("req", "-x509", *self._new_key(self._key_path), "-out", str(self.cert_path), "-days", "2",
                      "-subj", "/O=pyngress tests/CN=pyngress test CA")

    def issue(self, common_name: str, dns_names: tuple[str, ...] = (), organization: str = "pyngress",
              extensions: tuple[str, ...] = ()) -> Pair:
        """`extensions`: more X.509v3 extensions, as openssl's extension file writes them
        ("authorityInfoAccess=OCSP;URI:http://127.0.0.1:8080")."""
        n = next(self._serial)
        key, csr, cert, ext = (self.directory / f"leaf-{n}.{suffix}" for suffix in ("key", "csr", "crt", "ext"))
        ext.write_text("subjectAltName=" + ",".join(f"DNS:{name}" for name in dns_names or (common_name,)) + "\n"
                       + "".join(f"{extension}\n" for extension in extensions))
        self._openssl("req", *self._new_key(key), "-out", str(csr), "-subj", f"/O={organization}/CN={common_name}")
        self._openssl("x509", "-req", "-in", str(csr), "-CA", str(self.cert_path), "-CAkey", str(self._key_path),
                      "-set_serial", str(n), "-days", "2", "-extfile", str(ext), "-out", str(cert))
        return Pair(cert.read_text(), key.read_text())

    @staticmethod
    def _new_key(path: Path) -> list[str]:
        return ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(path)]

    @staticmethod
    def _openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)


def tls_secret(name: str, pair: Pair, namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"tls.crt": base64.b64encode(pair.cert.encode()).decode(),
                     "tls.key": base64.b64encode(pair.key.encode()).decode()}}


def subject(peer: dict[str, Any]) -> dict[str, str]:
    return {key: value for rdn in peer.get("subject", ()) for key, value in rdn}


def served_certificate(port: int, sni: str | None, trusted: list[Path], check_hostname: bool = True) -> dict[str, str]:
    """The subject of the certificate served for `sni`, verified against `trusted` (PEM files) as a
    browser would; `check_hostname` False for certificates that are not for `sni` (the defaults)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = check_hostname
    for path in trusted:
        context.load_verify_locations(cafile=str(path))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=sni) as tls:
            return subject(tls.getpeercert())


def s_client_subject(port: int, sni: str) -> str:
    """The subject line `openssl s_client` prints for the server's certificate."""
    out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", sni],
                         input=b"", capture_output=True, timeout=20).stdout.decode(errors="replace")
    return next(line for line in out.splitlines() if line.startswith("subject="))


@dataclass
class HttpsResponse:
    status: int
    headers: dict[str, str]
    body: bytes


def https_get(port: int, host: str, path: str = "/", trusted: list[Path] = (), sni: str | None = None,
              source: str | None = None, method: str = "GET", headers: dict[str, str] | None = None,
              client_cert: tuple[Path, Path] | None = None, body: bytes | None = None) -> HttpsResponse:
    """A request over TLS with SNI `sni` (default: `host`), verifying the chain against `trusted` (none: no
    verification) but not the name; from the local address `source` and with the client certificate and key
    `client_cert` when given."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    if not trusted:
        context.verify_mode = ssl.CERT_NONE
    for path_ in trusted:
        context.load_verify_locations(cafile=str(path_))
    if client_cert:
        context.load_cert_chain(*client_cert)
    raw = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0) if source else None)
    conn = http.client.HTTPConnection("127.0.0.1", timeout=10)
    conn.sock = context.wrap_socket(raw, server_hostname=sni or host)
    try:
        conn.request(method, path, body=body, headers={"Host": host, **(headers or {})})
        response = conn.getresponse()
        return HttpsResponse(response.status, {k.lower(): v for k, v in response.getheaders()}, response.read())
    finally:
        conn.close()


class _TlsEchoHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self) -> None:
        peer = self.request.getpeercert() or {}
        body = json.dumps({"backend": "tls-backend", "client": self.client_address[0], "method": self.command,
                           "sni": getattr(self.request, "sni", None),
                           "client_cert": dict(item for rdn in peer.get("subject", ()) for item in rdn).get("commonName"),
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_OPTIONS = _answer

    def log_message(self, *args: Any) -> None:
        pass


def start_tls_echo(address: tuple[str, int], pair: Pair, directory: Path,
                   client_ca: Path | None = None) -> ThreadingHTTPServer:
    """An HTTPS server with its own certificate that answers with the SNI, the client certificate's CN and the
    headers it received; with `client_ca`, a client certificate that CA signed is required."""
    pem = directory / "tls-echo.pem"
    pem.write_text(pair.cert + pair.key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=str(client_ca))

    def remember_sni(sock: ssl.SSLObject, name: str | None, _context: ssl.SSLContext) -> None:
        sock.sni = name

    context.sni_callback = remember_sni
    server = ThreadingHTTPServer(address, _TlsEchoHandler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server
