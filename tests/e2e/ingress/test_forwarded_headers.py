"""What a backend is told about the client (X-Forwarded-*, X-Original-Forwarded-*, Host) and where the redirect to
HTTPS points, with and without the ConfigMap's use-forwarded-headers and use-proxy-protocol, as ingress-nginx's e2e
suite asserts them (settings/forwarded_headers.go, settings/tls.go, settings/proxy_protocol.go)."""
from __future__ import annotations

import json
import socket
from typing import Callable

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

# HTTPS requests go to the fake certificate: what is checked is the answer, not the certificate.
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")

CONFIGMAP = "ingress/controller"
# Seconds a ConfigMap change may take: most need a reload, and reloads are rate limited (--sync-rate-limit).
RELOADED = 30
HOST = "forwarded-headers"  # a single-label host, as in ingress-nginx's test
TLS_HOST = "forwarded-tls.example.com"  # listed in spec.tls: plain HTTP is redirected
# What a client (or a load balancer in front) sends.
CLIENT_HEADERS = {"X-Forwarded-Port": "1234", "X-Forwarded-Proto": "myproto", "X-Forwarded-Scheme": "myproto",
                  "X-Forwarded-For": "1.2.3.4", "X-Forwarded-Host": "myhost"}


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"),
                                                     extra_args=[f"--configmap={CONFIGMAP}"])
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("FWD", "fwd"), configmap(),
                  k8s.ingress("fwd", [k8s.rule(HOST, ("/", "Prefix", "fwd", 80))]),
                  k8s.ingress("fwd-tls", [k8s.rule(TLS_HOST, ("/", "Prefix", "fwd", 80))],
                              tls=[{"hosts": [TLS_HOST]}]))
    stage.expect(HOST, "/", "FWD")
    stage.expect(TLS_HOST, "/", "308")
    yield stage
    controller.stop()


def seen_by_backend(stage: Stage, **headers: str) -> dict[str, str]:
    response = requests.get(f"http://127.0.0.1:{stage.controller.http_port}/", headers={"Host": HOST, **headers},
                            timeout=5)
    assert response.status_code == 200, response.text
    return response.json()["headers"]


def redirect(stage: Stage, scheme: str = "http", **headers: str) -> tuple[int, str]:
    port = stage.controller.https_port if scheme == "https" else stage.controller.http_port
    response = requests.get(f"{scheme}://127.0.0.1:{port}/", headers={"Host": TLS_HOST, **headers},
                            allow_redirects=False, verify=False, timeout=5)
    return response.status_code, response.headers.get("Location", "")


def steadily(check: Callable[[], bool]) -> Callable[[], bool]:
    """`check`, true for several requests in a row: just after a reload, an old worker may still take one."""
    return lambda: all(check() for _ in range(5))


def use_forwarded_headers(stage: Stage, value: str, **more: str) -> None:
    stage.cluster.apply(configmap(**{"use-forwarded-headers": value, **more}))
    trusted = value == "true"
    wait_for(steadily(lambda: (seen_by_backend(stage, **CLIENT_HEADERS)["x-forwarded-proto"] == "myproto") == trusted),
             RELOADED, what=f"use-forwarded-headers {value}")


def test_a_clients_x_forwarded_headers_are_not_trusted_by_default(stage: Stage) -> None:
    use_forwarded_headers(stage, "false")
    seen = seen_by_backend(stage, **CLIENT_HEADERS)
    assert seen["host"] == seen["x-forwarded-host"] == HOST
    assert seen["x-forwarded-port"] == str(stage.controller.http_port)
    # The client's own X-Forwarded-Scheme does not pass: nginx says what it saw.
    assert (seen["x-forwarded-proto"], seen["x-forwarded-scheme"], seen["x-scheme"]) == ("http", "http", "http")
    assert seen["x-forwarded-for"] == seen["x-real-ip"] == "127.0.0.1"
    # What the client sent goes on under other names, as ingress-nginx passes it.
    assert (seen["x-original-forwarded-for"], seen["x-original-forwarded-host"]) == ("1.2.3.4", "myhost")
    # Nothing to pass on: no header.
    plain = seen_by_backend(stage)
    assert "x-original-forwarded-for" not in plain and "x-original-forwarded-host" not in plain


def test_use_forwarded_headers_trusts_them_and_takes_the_first_forwarded_host(stage: Stage) -> None:
    use_forwarded_headers(stage, "true")
    seen = seen_by_backend(stage, **CLIENT_HEADERS)
    # The backend's Host is ingress-nginx's $best_http_host: the forwarded host.
    assert seen["host"] == seen["x-forwarded-host"] == "myhost"
    assert (seen["x-forwarded-proto"], seen["x-forwarded-scheme"], seen["x-forwarded-port"]) == (
        "myproto", "myproto", "1234")
    assert seen["x-forwarded-for"] == "1.2.3.4"
    assert (seen["x-original-forwarded-for"], seen["x-original-forwarded-host"]) == ("1.2.3.4", "myhost")

    listed = seen_by_backend(stage, **{**CLIENT_HEADERS, "X-Forwarded-Host": "myhost.com, another.host,example.net"})
    assert listed["host"] == listed["x-forwarded-host"] == "myhost.com"
    assert listed["x-original-forwarded-host"] == "myhost.com, another.host,example.net"
    # Without X-Forwarded-Host or X-Forwarded-Proto, what nginx saw.
    own = seen_by_backend(stage)
    assert (own["host"], own["x-forwarded-host"], own["x-forwarded-proto"], own["x-forwarded-scheme"]) == (
        HOST, HOST, "http", "http")


def test_x_original_forwarded_for_is_what_the_client_sent_beside_the_full_chain(stage: Stage) -> None:
    use_forwarded_headers(stage, "true", **{"compute-full-forwarded-for": "true"})
    wait_for(steadily(lambda: seen_by_backend(stage, **CLIENT_HEADERS)["x-forwarded-for"] == "1.2.3.4, 127.0.0.1"),
             RELOADED, what="the full chain")
    assert seen_by_backend(stage, **CLIENT_HEADERS)["x-original-forwarded-for"] == "1.2.3.4"
    # forwarded-for-header names the header that carries the client, and the one passed on as the original.
    stage.cluster.apply(configmap(**{"use-forwarded-headers": "true", "forwarded-for-header": "X-Client"}))
    wait_for(steadily(lambda: seen_by_backend(stage, **{"X-Client": "5.6.7.8"}).get("x-original-forwarded-for")
                      == "5.6.7.8"), RELOADED, what="X-Original-Forwarded-For from X-Client")
    assert seen_by_backend(stage, **{"X-Client": "5.6.7.8"})["x-real-ip"] == "5.6.7.8"


def test_the_redirect_to_https_ignores_forwarded_headers_by_default(stage: Stage) -> None:
    use_forwarded_headers(stage, "false")
    assert redirect(stage) == (308, f"https://{TLS_HOST}")  # no port, and no trailing slash
    assert redirect(stage, **{"X-Forwarded-Host": "example.com:80", "X-Forwarded-Proto": "https"}) == (
        308, f"https://{TLS_HOST}")
    assert redirect(stage, "https", **{"X-Forwarded-Proto": "http"})[0] == 200


def test_the_redirect_to_https_follows_the_load_balancer_with_use_forwarded_headers(stage: Stage) -> None:
    use_forwarded_headers(stage, "true")
    # The first forwarded host, without its port.
    assert redirect(stage, **{"X-Forwarded-Host": "example.com:80"}) == (308, "https://example.com")
    assert redirect(stage, **{"X-Forwarded-Host": "a.example.com, b.example.com"}) == (308, "https://a.example.com")
    # The load balancer took HTTPS from the client: no redirect; it took plain HTTP: redirected, whatever reached
    # nginx.
    assert redirect(stage, **{"X-Forwarded-Proto": "https"})[0] == 200
    assert redirect(stage, "https", **{"X-Forwarded-Proto": "http"}) == (308, f"https://{TLS_HOST}")



def test_use_port_in_redirects_in_the_configmap_names_the_https_port(stage: Stage) -> None:
    # ingress-nginx's ConfigMap key is the default of the annotation of the same name.
    stage.cluster.apply(configmap(**{"use-port-in-redirects": "true"}))
    wait_for(steadily(lambda: redirect(stage) == (308, f"https://{TLS_HOST}:{stage.controller.https_port}")), RELOADED,
             what="the HTTPS port named")
    stage.cluster.apply(configmap())
    wait_for(steadily(lambda: redirect(stage) == (308, f"https://{TLS_HOST}")), RELOADED, what="no port again")


def through_proxy_protocol(stage: Stage, host: str, client_port: int) -> tuple[bytes, dict]:
    """A request behind a PROXY header from a load balancer that took it on `client_port`: the status line, and
    what the backend saw (an empty dict for an answer from nginx itself)."""
    with socket.create_connection(("127.0.0.1", stage.controller.http_port), timeout=5) as connection:
        connection.sendall(f"PROXY TCP4 192.168.0.1 192.168.0.11 56324 {client_port}\r\n"
                           f"GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0]
    return status, json.loads(body)["headers"] if b" 200 " in status else {}


def test_use_proxy_protocol_takes_the_port_and_https_from_the_proxy_header(stage: Stage) -> None:
    # As ingress-nginx's settings/proxy_protocol.go: the load balancer's port, and HTTPS when it is 443.
    stage.cluster.apply(configmap(**{"use-proxy-protocol": "true"}))
    wait_for(steadily(lambda: through_proxy_protocol(stage, HOST, 1234)[1].get("x-forwarded-for") == "192.168.0.1"),
             RELOADED, what="use-proxy-protocol on")
    seen = through_proxy_protocol(stage, HOST, 1234)[1]
    assert (seen["x-forwarded-port"], seen["x-forwarded-proto"], seen["x-forwarded-for"]) == (
        "1234", "http", "192.168.0.1")
    seen = through_proxy_protocol(stage, HOST, 443)[1]
    assert (seen["x-forwarded-port"], seen["x-forwarded-proto"], seen["x-scheme"]) == ("443", "https", "https")
    # A load balancer that ended TLS on its port 443 and speaks plain HTTP to nginx: no redirect loop.
    assert through_proxy_protocol(stage, TLS_HOST, 443)[0].startswith(b"HTTP/1.1 200")
    assert through_proxy_protocol(stage, TLS_HOST, 80)[0].startswith(b"HTTP/1.1 308")
    stage.cluster.apply(configmap())
    wait_for(steadily(lambda: stage.controller.get("/", HOST).status_code == 200), RELOADED,
             what="use-proxy-protocol off")
