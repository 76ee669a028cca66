"""The access log through real nginx: ingress-nginx's upstreaminfo format field for field, JSON escaping,
custom formats with ingress-nginx's variables, and what is left out of the log."""
from __future__ import annotations

import json
import re
import socket

import pytest

from services.nginxconf.config import AccessLog, LocationProfile
from services.syncer.annotations.base import CanaryPolicy
from services.syncer.model.types import CanaryRoute, HostRoutes, Route
from tests.support.access_log import UPSTREAMINFO

from .conftest import eventually

HOST = "logs.example.test"


@pytest.fixture(scope="module")
def backends(echo):
    return {"team-web-80": [echo("web").endpoint], "team-web-canary-80": [echo("canary").endpoint]}


def log_lines(nginx, count: int) -> list[str]:
    path = nginx.base / "access.log"
    return eventually(lambda: len(path.read_text().splitlines()) >= count and path.read_text().splitlines(),
                      timeout=5)


def configure(nginx, **access_log) -> None:
    path = nginx.base / "access.log"
    path.unlink(missing_ok=True)
    # Unbuffered: each worker's buffer would flush on its own, and these tests read lines in request order.
    nginx.apply(nginx.config(access_log=AccessLog(path=str(path), params="", **access_log),
                             profiles=[LocationProfile("quiet", (("access_log", "off"),))]))


def test_lines_have_ingress_nginx_upstreaminfo_fields(shared_nginx, backends):
    nginx = shared_nginx
    configure(nginx)
    canary = CanaryRoute(backend="team-web-canary-80", ingress="team/canary", policy=CanaryPolicy(header="X-Canary"))
    nginx.push({HOST: HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web", service="web",
                                                    canary=canary)})}, backends)
    assert nginx.get("/a?b=1", host=HOST, headers={"User-Agent": "parser-test", "Referer": "http://r.test/",
                                                   "X-Request-ID": "req-123"}).status == 200
    assert nginx.get("/b", host=HOST, headers={"X-Canary": "always", "X-Request-ID": "req-456"}).backend == "canary"

    first, second = log_lines(nginx, 2)

    fields = UPSTREAMINFO.match(first).groupdict()
    assert fields["remote_addr"] == "127.0.0.1" and fields["remote_user"] == "-"
    assert fields["request"] == "GET /a?b=1 HTTP/1.1" and fields["status"] == "200"
    assert (fields["http_referer"], fields["http_user_agent"]) == ("http://r.test/", "parser-test")
    assert fields["proxy_upstream_name"] == "team-web-80" and fields["proxy_alternative_upstream_name"] == ""
    assert fields["upstream_addr"] == backends["team-web-80"][0] and fields["upstream_status"] == "200"
    assert int(fields["upstream_response_length"]) == int(fields["body_bytes_sent"]) > 0
    assert fields["req_id"] == "req-123"
    # The canary: the main backend stays in proxy_upstream_name, the canary is the alternative, as ingress-nginx.
    fields = UPSTREAMINFO.match(second).groupdict()
    assert (fields["proxy_upstream_name"], fields["proxy_alternative_upstream_name"]) == \
        ("team-web-80", "team-web-canary-80")
    assert fields["upstream_addr"] == backends["team-web-canary-80"][0] and fields["req_id"] == "req-456"


def test_the_request_id_the_backend_got_is_the_one_logged(shared_nginx, backends):
    nginx = shared_nginx
    configure(nginx, format="$status $req_id")
    nginx.push({HOST: HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web", service="web")})}, backends)
    sent = [nginx.get(f"/{n}", host=HOST).json["headers"]["x-request-id"] for n in range(3)]
    # A request nginx refuses before any routing (no Host header) still gets an id: nginx's own.
    with socket.create_connection(("127.0.0.1", nginx.http_port), timeout=10) as refused:
        refused.sendall(b"GET / HTTP/1.1\r\n\r\n")
        assert refused.recv(100).startswith(b"HTTP/1.1 400")

    # A worker writes a request's line after the response has gone out: two requests' lines may come in either order.
    lines = log_lines(nginx, 4)
    refused_lines = [line for line in lines if line.startswith("400 ")]
    assert sorted(line for line in lines if line not in refused_lines) == sorted(f"200 {rid}" for rid in sent)
    assert len(refused_lines) == 1
    assert re.fullmatch(r"400 [0-9a-f]{32}", refused_lines[0]) and refused_lines[0][4:] not in sent
    # The router's variables, unset in that request, are not worth a warning each.
    assert "uninitialized" not in nginx.log()


def test_default_backend_and_quiet_locations_are_left_out_unless_asked(shared_nginx, backends):
    nginx = shared_nginx
    configure(nginx)
    nginx.push({HOST: HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web", service="web"),
                                         "/quiet": Route("team-web-80", profile="quiet", ingress="team/web")})},
               backends)
    assert nginx.get("/", host="nobody.example.test").status == 404
    assert nginx.get("/quiet", host=HOST).status == 200   # enable-access-log: "false"
    assert nginx.get("/loud", host=HOST).status == 200

    [line] = log_lines(nginx, 1)
    assert '"GET /loud HTTP/1.1"' in line

    configure(nginx, default_backend=True)
    assert nginx.get("/", host="nobody.example.test").status == 404
    [line] = log_lines(nginx, 1)
    assert " 404 " in line and "[-]" in line


def test_a_json_format_is_escaped_and_names_the_ingress(shared_nginx, backends):
    nginx = shared_nginx
    fmt = ('{"ns": "$namespace", "ingress": "$ingress_name", "service": "$service_name", "path": "$location_path", '
           '"ua": "$http_user_agent", "status": $status, "upstream": "$proxy_upstream_name"}')
    configure(nginx, format=fmt, escape="json")
    nginx.push({HOST: HostRoutes(prefix={"/api": Route("team-web-80", ingress="team/web", service="web")})},
               backends)
    assert nginx.get("/api/x", host=HOST, headers={"User-Agent": 'say "hi"\\ ok'}).status == 200

    [line] = log_lines(nginx, 1)
    assert json.loads(line) == {"ns": "team", "ingress": "web", "service": "web", "path": "/api",
                                "ua": 'say "hi"\\ ok', "status": 200, "upstream": "team-web-80"}


def test_disable_access_log_writes_nothing(shared_nginx, backends):
    nginx = shared_nginx
    path = nginx.base / "access.log"
    path.unlink(missing_ok=True)
    nginx.apply(nginx.config(access_log=AccessLog(enabled=False, path=str(path))))
    nginx.push({HOST: HostRoutes(prefix={"/": Route("team-web-80", ingress="team/web")})}, backends)
    assert nginx.get("/", host=HOST).status == 200
    assert not path.exists() or path.read_text() == ""
