"""backend-protocol GRPC through a real nginx: the request reaches the backend over HTTP/2 cleartext
(grpc_pass), with the forwarding headers, and the profile's proxy timeouts become the grpc module's."""
from __future__ import annotations

import subprocess
from typing import Iterator

import pytest

from services.nginxconf.render import render
from services.syncer.annotations import parse_annotations
from services.syncer.model.types import HostRoutes
from tests.support.h2c_backend import answer_fields
from tests.support.h2c_backend import h2c_backend as running_h2c_backend

from .conftest import route

PREFIX = "nginx.ingress.kubernetes.io"
GRPC = parse_annotations({f"{PREFIX}/backend-protocol": "GRPC", f"{PREFIX}/proxy-read-timeout": "30"},
                         prefix=PREFIX).profile


@pytest.fixture(scope="module")
def h2c_backend(tmp_path_factory) -> Iterator[str]:
    with running_h2c_backend(tmp_path_factory.mktemp("h2c")) as port:
        yield f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def nginx(shared_nginx, h2c_backend):
    shared_nginx.apply(shared_nginx.config(profiles=[GRPC]))
    shared_nginx.push({"grpc.test": HostRoutes(prefix={"/": route("h2c", profile=GRPC.name)})},
                      {"h2c": [h2c_backend]})
    return shared_nginx


def curl_http2(port: int, path: str) -> str:
    return subprocess.run(["curl", "-sk", "--http2", "--resolve", f"grpc.test:{port}:127.0.0.1",
                           "-H", "TE: trailers", "-H", "Content-Type: application/grpc",
                           f"https://grpc.test:{port}{path}"], capture_output=True, text=True, timeout=10,
                          check=True).stdout


def test_a_grpc_route_reaches_its_backend_over_http2_with_the_forwarding_headers(nginx):
    seen = answer_fields(curl_http2(nginx.https_port, "/helloworld.Greeter/SayHello"))
    assert seen["protocol"] == "HTTP/2.0" and seen["host"].startswith("grpc.test:"), seen
    assert (seen["xff"], seen["te"]) == ("127.0.0.1", "trailers")
    assert seen["rid"]  # a request id was sent


def test_the_grpc_location_uses_the_grpc_module_with_the_proxy_timeouts(nginx):
    text = render(nginx.config(profiles=[GRPC]))
    location = text[text.index(f"location @profile_{GRPC.name}"):]
    location = location[:location.index("\n        }")]
    assert 'grpc_pass grpc://upstream_balancer;' in location and "proxy_pass" not in location
    assert 'grpc_read_timeout "30s";' in location
    assert "Upgrade" not in location and "Connection" not in location
