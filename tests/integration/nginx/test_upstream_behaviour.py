"""The upstream-behaviour annotations as a client sees them through a real nginx: retries on the next
endpoint, the backend's Location and Set-Cookie rewritten, the Connection header sent, response buffers."""
from __future__ import annotations

import contextlib

import json
from http.server import BaseHTTPRequestHandler
from typing import Iterator

import pytest

from services.syncer.annotations import parse_annotations
from services.syncer.model.types import HostRoutes

from .conftest import route
from tests.support.http_servers import port_of, serving

PREFIX = "nginx.ingress.kubernetes.io"


def profile(**annotations: str):
    return parse_annotations({f"{PREFIX}/{k.replace('_', '-')}": v for k, v in annotations.items()},
                             prefix=PREFIX).profile


NEXT_ON_502 = profile(proxy_next_upstream="error timeout http_502")
NEXT_OFF = profile(proxy_next_upstream="off")
REDIRECT = profile(proxy_redirect_from="http://backend.internal/", proxy_redirect_to="/app/")
COOKIES = profile(proxy_cookie_path="/ /app", proxy_cookie_domain="backend.internal example.test")
CLOSE = profile(connection_proxy_header="close")
BUFFERED = profile(proxy_buffering="on", proxy_buffer_size="8k", proxy_buffers_number="8",
                   proxy_busy_buffers_size="16k", proxy_max_temp_file_size="0", client_body_buffer_size="64k")
PROFILES = [NEXT_ON_502, NEXT_OFF, REDIRECT, COOKIES, CLOSE, BUFFERED]
BIG = 3 * 1024 * 1024


class _Backend(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    name = "?"

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        if self.name == "bad":
            return self._answer(502, b"bad gateway", [])
        if self.path == "/redirect":
            return self._answer(302, b"", [("Location", "http://backend.internal/next"),
                                           ("Refresh", "0; url=http://backend.internal/later")])
        if self.path == "/cookie":
            return self._answer(200, b"{}", [("Set-Cookie", "s=1; Path=/; Domain=backend.internal")])
        if self.path == "/big":
            return self._answer(200, b"x" * BIG, [])
        body = json.dumps({"backend": self.name, "headers": {k.lower(): v for k, v in self.headers.items()}})
        self._answer(200, body.encode(), [("Content-Type", "application/json")])

    def _answer(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def backends() -> Iterator[dict[str, str]]:
    with contextlib.ExitStack() as stack:
        servers = {name: stack.enter_context(serving(type(f"Backend_{name}", (_Backend,), {"name": name})))
                   for name in ("good", "bad")}
        yield {name: f"127.0.0.1:{port_of(server)}" for name, server in servers.items()}


@pytest.fixture(scope="module")
def nginx(shared_nginx, backends):
    shared_nginx.apply(shared_nginx.config(profiles=PROFILES))
    routes = {"/next": route("mixed", profile=NEXT_ON_502.name), "/off": route("mixed", profile=NEXT_OFF.name),
              "/default": route("mixed"), "/redirect": route("good", profile=REDIRECT.name),
              "/cookie": route("good", profile=COOKIES.name), "/close": route("good", profile=CLOSE.name),
              "/big": route("good", profile=BUFFERED.name), "/plain": route("good")}
    shared_nginx.push({"up.test": HostRoutes(prefix=routes)},
                      {"mixed": [backends["bad"], backends["good"]], "good": [backends["good"]]})
    return shared_nginx


def statuses(nginx, path: str, count: int = 20) -> set[int]:
    return {nginx.get(path, host="up.test").status for _ in range(count)}


def test_proxy_next_upstream_with_http_502_retries_the_other_endpoint(nginx):
    assert statuses(nginx, "/next") == {200}


@pytest.mark.parametrize("path", ["/off", "/default"])  # the default retries on error and timeout only
def test_without_http_502_a_502_reaches_the_client(nginx, path):
    assert statuses(nginx, path) == {200, 502}


def test_proxy_redirect_rewrites_location_and_refresh(nginx):
    response = nginx.get("/redirect", host="up.test")
    assert response.status == 302
    # A replacement that is a path becomes absolute on this server, as nginx's proxy_redirect does, without the
    # port (ingress-nginx's port_in_redirect off).
    assert response.headers["location"] == "http://up.test/app/next"
    assert response.headers["refresh"].endswith("url=/app/later")


def test_proxy_cookie_path_and_domain_rewrite_set_cookie(nginx):
    response = nginx.get("/cookie", host="up.test")
    assert response.headers["set-cookie"] == "s=1; Path=/app; Domain=example.test"


def test_connection_proxy_header_is_what_the_backend_receives(nginx):
    assert nginx.get("/close", host="up.test").json["headers"]["connection"] == "close"
    assert "connection" not in nginx.get("/plain", host="up.test").json["headers"]  # kept alive upstream


def test_buffer_settings_pass_nginx_and_a_large_response_arrives_whole(nginx):
    response = nginx.get("/big", host="up.test")
    assert response.status == 200 and len(response.body) == BIG
