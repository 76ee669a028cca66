"""A location profile's typed fields (the CORS policy, HTTPS to the backend) and the ConfigMap's
use-forwarded-headers / use-proxy-protocol, through a real nginx."""
from __future__ import annotations

import json
import re
import socket
import ssl
from http.server import BaseHTTPRequestHandler

import pytest

from services.nginxconf.config import CorsPolicy, LocationProfile
from services.nginxconf.render import RenderError, render
from services.syncer.model.types import HostRoutes

from .conftest import route
from tests.support.http_servers import port_of, serving

CORS = LocationProfile("cors", cors=CorsPolicy(
    allow_origin="https://app.example.com,https://*.example.org:8443", allow_methods="GET,PUT",
    allow_headers="X-Api-Key,Content-Type", allow_credentials=True, max_age=600, expose_headers="X-Request-Id"))
CORS_ANY = LocationProfile("corsany", cors=CorsPolicy(
    allow_origin="*", allow_methods="GET", allow_headers="Content-Type", allow_credentials=False, max_age=5))
HTTPS_BACKEND = LocationProfile("tlsbackend", backend_scheme="https")


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    shared_nginx.apply(shared_nginx.config(profiles=[CORS, CORS_ANY, HTTPS_BACKEND]))
    return shared_nginx


class _TlsEcho(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        body = json.dumps({"backend": "tls", "sni": self.request.server_hostname_seen,
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def tls_backend(make_certificate, tmp_path_factory):
    """An HTTPS backend that reports the SNI nginx sent."""
    pair = make_certificate("backend.internal")
    pem = tmp_path_factory.mktemp("backend") / "backend.pem"
    pem.write_text(pair["cert"] + pair["key"])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pem)

    def remember_sni(sock, name, _ctx):
        sock.server_hostname_seen = name

    context.sni_callback = remember_sni
    with serving(_TlsEcho, tls=context) as server:
        yield f"127.0.0.1:{port_of(server)}"


def test_a_preflight_from_an_allowed_origin_is_answered_by_nginx(nginx, echo):
    app = echo("cors-app")
    nginx.push({"cors.test": HostRoutes(prefix={"/": route("app", profile="cors")})}, {"app": [app.endpoint]})

    preflight = nginx.get("/api", host="cors.test", method="OPTIONS",
                          headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT"})

    assert preflight.status == 204 and preflight.body == b""
    assert {k: v for k, v in preflight.headers.items() if k.startswith("access-control-")} == {
        "access-control-allow-origin": "https://app.example.com",
        "access-control-allow-credentials": "true",
        "access-control-allow-methods": "GET,PUT",
        "access-control-allow-headers": "X-Api-Key,Content-Type",
        "access-control-expose-headers": "X-Request-Id",
        "access-control-max-age": "600",
    }
    simple = nginx.get("/api", host="cors.test", headers={"Origin": "https://a.example.org:8443"})
    assert simple.backend == "cors-app"
    assert simple.headers["access-control-allow-origin"] == "https://a.example.org:8443"
    assert simple.headers["access-control-expose-headers"] == "X-Request-Id"


@pytest.mark.parametrize("origin", ["https://evil.example.com", "https://a.b.example.org:8443",
                                    "https://example.org:8443", "http://app.example.com", None])
def test_other_origins_get_no_cors_headers_and_their_preflight_reaches_the_backend(nginx, echo, origin):
    app = echo("cors-app2")
    nginx.push({"cors.test": HostRoutes(prefix={"/": route("app", profile="cors")})}, {"app": [app.endpoint]})

    response = nginx.get("/api", host="cors.test", method="OPTIONS", headers={"Origin": origin} if origin else {})

    assert response.status == 501  # the echo backend's answer to OPTIONS
    assert not any(k.startswith("access-control-") for k in response.headers)


def test_allow_origin_star_answers_any_origin_without_credentials(nginx, echo):
    app = echo("cors-any")
    nginx.push({"any.test": HostRoutes(prefix={"/": route("app", profile="corsany")})}, {"app": [app.endpoint]})

    preflight = nginx.get("/", host="any.test", method="OPTIONS", headers={"Origin": "https://x.test"})
    assert preflight.status == 204
    assert preflight.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in preflight.headers
    assert nginx.get("/", host="any.test").headers["access-control-max-age"] == "5"


def test_an_https_backend_is_reached_over_tls_with_the_request_host_as_sni(nginx, tls_backend):
    nginx.push({"secure-backend.test": HostRoutes(prefix={"/": route("tls", profile="tlsbackend")})},
               {"tls": [tls_backend]})

    response = nginx.get("/", host="secure-backend.test")

    assert response.backend == "tls"
    assert response.json["sni"] == "secure-backend.test"


def _raw_get(port: int, prefix: bytes, host: str, headers: str = "") -> dict:
    """A request preceded by `prefix` (a PROXY protocol header, say); returns the echo's JSON."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(prefix + f"GET / HTTP/1.1\r\nHost: {host}\r\n{headers}Connection: close\r\n\r\n".encode())
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), head
    return json.loads(body)


def test_use_forwarded_headers_trusts_the_load_balancer_s_x_forwarded_headers(nginx_factory, echo):
    instance = nginx_factory()
    app = echo("fwd")
    instance.apply(instance.config(use_forwarded_headers=True))
    instance.push({"fwd.test": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]})

    seen = _raw_get(instance.http_port, b"", "fwd.test",
                    "X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Port: 443\r\n"
                    "X-Forwarded-Host: public.example.com\r\n")["headers"]
    assert seen["x-real-ip"] == "203.0.113.7"
    # As ingress-nginx: the client's address; the whole chain only with compute-full-forwarded-for.
    assert seen["x-forwarded-for"] == "203.0.113.7"
    assert (seen["x-forwarded-proto"], seen["x-forwarded-port"], seen["x-forwarded-host"]) == (
        "https", "443", "public.example.com")
    plain = _raw_get(instance.http_port, b"", "fwd.test")["headers"]
    assert (plain["x-forwarded-for"], plain["x-forwarded-proto"]) == ("127.0.0.1", "http")


def test_use_proxy_protocol_takes_the_client_address_from_the_proxy_header(nginx_factory, echo):
    instance = nginx_factory()
    app = echo("pp")
    instance.apply(instance.config(use_proxy_protocol=True))
    instance.push({"pp.test": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]})

    header = f"PROXY TCP4 198.51.100.9 127.0.0.1 40000 {instance.http_port}\r\n".encode()
    seen = _raw_get(instance.http_port, header, "pp.test")["headers"]
    assert (seen["x-real-ip"], seen["x-forwarded-for"]) == ("198.51.100.9", "198.51.100.9")
    with socket.create_connection(("127.0.0.1", instance.http_port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: pp.test\r\n\r\n")
        assert sock.recv(100) == b""  # without a PROXY header nginx closes the connection


def test_a_backend_scheme_outside_the_contract_is_refused(shared_nginx):
    with pytest.raises(RenderError, match=re.escape("the backend scheme must be http, https, grpc, grpcs, fcgi or auto, got 'ftp'")):
        render(shared_nginx.config(profiles=[LocationProfile("bad", backend_scheme="ftp")]))
