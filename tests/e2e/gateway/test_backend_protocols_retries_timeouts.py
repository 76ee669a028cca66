"""HTTPRoute backend features through the whole controller in manifests mode, case by case as the Gateway API
conformance suite checks them (its cases, our manifests): a Service port's appProtocol (HTTPRouteBackendProtocolH2C,
HTTPRouteBackendProtocolWebSocket), retries (HTTPRouteRetry, HTTPRouteRetryWithTimeouts,
HTTPRouteRetryConnectionError) and timeouts (HTTPRouteTimeoutRequest, HTTPRouteTimeoutBackendRequest).

The backends: tests/support/flaky_backend.py fails, resets and delays on demand as the suite's echo server does, and
counts the tries of each request; an h2c nginx (tests/support/h2c_backend.py); a WebSocket echo, plain and over TLS.
"""
from __future__ import annotations

import socket
import socketserver
import ssl
import subprocess
import uuid

import pytest

from tests.e2e.tls.pki import TestCA, tls_secret
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.flaky_backend import flaky_backend
from tests.support.h2c_backend import answer_fields, h2c_backend
from tests.support.http_servers import port_of, serving
from tests.support.net import wait_for
from tests.support.websocket import BINARY, TEXT, EchoHandler, accept_key, frame, handshake, read_frame

RELOADS = "nginx_ingress_controller_success"


def service(name: str, port: int, address: str, target: int, app_protocol: str | None = None) -> list[dict]:
    """A Service whose port names `app_protocol`, and its endpoint."""
    found = k8s.service(name, port=port)
    if app_protocol is not None:
        found["spec"]["ports"][0]["appProtocol"] = app_protocol
    return [found, k8s.endpoint_slice(name, [address], target)]


def route(name: str, host: str, *rules: dict) -> dict:
    return gw.http_route(name, hostnames=[host], rules=rules)


def rule(service_name: str, port: int, path: str | None = None, *, retry: dict | None = None,
         timeouts: dict | None = None) -> dict:
    found = gw.rule(gw.backend_ref(service_name, port), matches=[gw.path_match(path)] if path else (),
                    timeouts=timeouts)
    return {**found, "retry": retry} if retry is not None else found


@pytest.fixture(scope="module")
def flaky(stage):
    """The flaky backend as Service "flaky" port 8080 (its appProtocol unset), and Gateway "gw" for any host."""
    with flaky_backend() as server:
        stage.cluster.apply(gw.gateway("gw"), *service("flaky", 8080, "127.0.0.1", port_of(server)))
        yield server


def ask(stage, flaky, host: str, path: str, **query: str) -> tuple[int, int]:
    """A request with a fresh uuid: the status it got and how many tries reached the backend."""
    request_id = str(uuid.uuid4())
    status = stage.controller.request("GET", path, host, params={**query, "uuid": request_id}).status_code
    return status, flaky.attempts(request_id)


# HTTPRouteRetry: (path, responseCode, succeedAfter) → status, as the suite's cases; tries: what reached the backend.
RETRY_CASES = [
    ("/retry/code-500-attempts-3", "500", "2", 200, 3),
    ("/retry/code-500-attempts-3", "500", "4", 500, 4),
    ("/retry/code-500-attempts-3", "503", "2", 503, 1),  # 503 is not among the rule's codes
    ("/retry/code-all-attempts-2", "500", "1", 200, 2),
    ("/retry/code-all-attempts-2", "500", "3", 500, 3),
    ("/retry/code-all-attempts-2", "502", "1", 200, 2),
    ("/retry/code-all-attempts-2", "502", "3", 502, 3),
    ("/retry/code-all-attempts-2", "503", "1", 200, 2),
    ("/retry/code-all-attempts-2", "503", "3", 503, 3),
    ("/retry/code-all-attempts-2", "504", "1", 200, 2),
    ("/retry/code-all-attempts-2", "504", "3", 504, 3),
]


@pytest.fixture(scope="module")
def retries(stage, flaky):
    host = "retry.example.com"
    stage.cluster.apply(route("retries", host,
                              rule("flaky", 8080, "/retry/code-500-attempts-3", retry={"codes": [500], "attempts": 3}),
                              rule("flaky", 8080, "/retry/code-all-attempts-2",
                                   retry={"codes": [500, 502, 503, 504], "attempts": 2})))
    for path in {case[0] for case in RETRY_CASES}:
        stage.expect_answer(host, path, 200, timeout=30)  # served, its location profile loaded
    return host


@pytest.mark.parametrize("path, code, succeed_after, want, tries", RETRY_CASES)
def test_retry_codes_and_attempts(stage, flaky, retries, path, code, succeed_after, want, tries):
    assert ask(stage, flaky, retries, path, responseCode=code, succeedAfter=succeed_after) == (want, tries)


def test_retry_with_timeouts(stage, flaky):
    """HTTPRouteRetryWithTimeouts: an attempt cut at backendRequest is retried; the retries stop at the request's
    deadline, which answers 504."""
    host = "retry-timeouts.example.com"
    stage.cluster.apply(route("retries-with-timeouts", host,
                              rule("flaky", 8080, "/retry/backend-request-timeout-200ms", retry={"attempts": 2},
                                   timeouts={"backendRequest": "200ms"}),
                              rule("flaky", 8080, "/retry/request-timeout-200ms", retry={"codes": [500], "attempts": 5},
                                   timeouts={"backendRequest": "200ms", "request": "400ms"})))
    stage.expect_answer(host, "/retry/backend-request-timeout-200ms", 200, timeout=30)
    stage.expect_answer(host, "/retry/request-timeout-200ms", 200, timeout=30)
    slow = "/retry/backend-request-timeout-200ms"
    assert ask(stage, flaky, host, slow, responseCode="500", succeedAfter="2", delayRetry="300ms") == (200, 3)
    assert ask(stage, flaky, host, slow, responseCode="500", succeedAfter="3", delayRetry="300ms") == (504, 3)
    deadline = "/retry/request-timeout-200ms"
    assert ask(stage, flaky, host, deadline, responseCode="500", succeedAfter="1") == (200, 2)
    status, tries = ask(stage, flaky, host, deadline, responseCode="500", succeedAfter="4", delayRetry="100ms")
    # The fifth try, which would succeed, would start after the deadline: 504 shows the deadline ended the retries.
    # Four tries fit in the 400 ms on an idle machine; on a loaded one each try takes longer and fewer fit.
    assert status == 504 and 2 <= tries <= 4


def test_retry_connection_error(stage, flaky):
    """HTTPRouteRetryConnectionError: a connection reset before any answer is retried, never more than the attempts.
    When they run out nginx answers 503 (the suite accepts 500 or 503), whether the first try was on a new connection
    or on a kept-alive one (after which nginx adds a try of its own that the rule refuses). A rule without `retry`
    keeps nginx's 502, as an Ingress does."""
    host = "retry-reset.example.com"
    path = "/retry/no-status-code-attempts-3"
    stage.cluster.apply(route("retries-connection-error", host, rule("flaky", 8080, path, retry={"attempts": 3}),
                              rule("flaky", 8080, "/no-retry")))
    stage.expect_answer(host, path, 200, timeout=30)
    assert ask(stage, flaky, host, path, succeedAfter="2") == (200, 3)
    for _ in range(3):
        assert ask(stage, flaky, host, path, succeedAfter="4") == (503, 4)
        assert ask(stage, flaky, host, path) == (200, 1)  # its connection stays open for the next request's first try
    assert ask(stage, flaky, host, "/no-retry", succeedAfter="4")[0] == 502


def test_retry_connection_error_answer_keeps_the_rules_response_headers(stage, flaky):
    """nginx's 503 after the last connection error carries the rule's ResponseHeaderModifier changes, as the 502 it
    replaces did."""
    host = "retry-reset-headers.example.com"
    changes = {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"add": [{"name": "X-Route", "value": "r"}]}}
    found = gw.rule(gw.backend_ref("flaky", 8080), filters=[changes])
    stage.cluster.apply(route("retries-connection-error-headers", host, {**found, "retry": {"attempts": 1}}))
    stage.expect_answer(host, "/", 200, timeout=30)
    answer = stage.controller.request("GET", "/", host, params={"succeedAfter": "2", "uuid": str(uuid.uuid4())})
    assert answer.status_code == 503 and answer.headers["X-Route"] == "r"
    assert "503 Service Temporarily Unavailable" in answer.text  # nginx's own page


@pytest.mark.parametrize("field", ["request", "backendRequest"])
def test_timeout_answers_504_and_zero_disables_it(stage, flaky, field):
    """HTTPRouteTimeoutRequest and HTTPRouteTimeoutBackendRequest: a backend slower than the timeout gets 504, a
    faster one answers, and "0s" disables the timeout."""
    host = f"timeout-{field.lower()}.example.com"
    stage.cluster.apply(route(f"timeout-{field.lower()}", host,
                              rule("flaky", 8080, "/timeout", timeouts={field: "500ms"}),
                              rule("flaky", 8080, "/disable-timeout", timeouts={field: "0s"})))
    stage.expect_answer(host, "/timeout", 200, timeout=30)
    assert ask(stage, flaky, host, "/timeout", delay="1s") == (504, 1)
    assert ask(stage, flaky, host, "/timeout", delay="100ms") == (200, 1)
    assert ask(stage, flaky, host, "/disable-timeout", delay="1s") == (200, 1)


def test_attempts_and_timeouts_change_without_a_reload(stage, flaky):
    """Retries and timeouts are table data; only the set of retried codes (and a request timeout beside a retry) is
    a location profile's."""
    host = "retry-change.example.com"

    def apply(attempts: int, timeout: str) -> None:
        stage.cluster.apply(route("retries-change", host, rule(
            "flaky", 8080, "/", retry={"codes": [500], "attempts": attempts}, timeouts={"backendRequest": timeout})))
    apply(1, "5s")
    stage.expect_answer(host, "/", 200, timeout=30)
    reloads = stage.controller.settled_reloads()
    assert ask(stage, flaky, host, "/", responseCode="500", succeedAfter="2") == (500, 2)
    apply(2, "300ms")
    stage.expect_answer(host, "/", 504, timeout=15, params={"delay": "1s"})  # each of the 3 tries cut at 300 ms
    assert ask(stage, flaky, host, "/", responseCode="500", succeedAfter="2") == (200, 3)
    assert stage.controller.metric(RELOADS) == reloads


@pytest.fixture(scope="module")
def h2c_host(stage, flaky, tmp_path_factory):
    """An h2c-only backend (it takes no HTTP/1.1) as a Service whose port names appProtocol kubernetes.io/h2c."""
    host = "h2c.example.com"
    pair = TestCA(tmp_path_factory.mktemp("h2c-pki")).issue(host)
    with h2c_backend(tmp_path_factory.mktemp("h2c")) as port:
        stage.cluster.apply(tls_secret("h2c-tls", pair), gw.gateway("h2c-tls", listeners=[
            gw.listener("https", port=443, protocol="HTTPS", hostname=host, certificate="h2c-tls")]))
        stage.cluster.apply(*service("infra-h2c", 8081, "127.0.0.1", port, "kubernetes.io/h2c"),
                            gw.http_route("backend-protocol-h2c", hostnames=[host], rules=[rule("infra-h2c", 8081)],
                                          parents=[{"name": "gw"}, {"name": "h2c-tls"}]))
        stage.expect_answer(host, "/", 200, timeout=30)
        yield host


def test_h2c_app_protocol_speaks_http2_to_the_backend(stage, h2c_host):
    """HTTPRouteBackendProtocolH2C: a port with appProtocol kubernetes.io/h2c is spoken to in HTTP/2 without TLS
    (prior knowledge), whatever the client spoke: here HTTP/1.1, a GET and a POST with a body."""
    host = h2c_host
    answer = stage.answer(host, "/")
    seen = answer_fields(answer["response"].text)
    assert seen["protocol"] == "HTTP/2.0" and seen["path"] == "/" and seen["host"] == host
    posted = stage.controller.request("POST", "/upload", host, data=b"x" * 1000)
    assert posted.status_code == 200 and answer_fields(posted.text)["path"] == "/upload"


def test_h2c_app_protocol_from_an_http2_client_over_tls(stage, h2c_host):
    """The same backend through the HTTPS listener, the client speaking HTTP/2 (ALPN h2) to nginx."""
    port = stage.controller.https_port

    def over_tls() -> tuple[str, str, str]:
        result = subprocess.run(["curl", "-sk", "--http2", "-w", "\n%{http_code} %{http_version}", "--resolve",
                                 f"{h2c_host}:{port}:127.0.0.1", f"https://{h2c_host}:{port}/over-tls"],
                                capture_output=True, text=True, timeout=10, check=True)
        body, status_and_version = result.stdout.rsplit("\n", 1)
        return body, *status_and_version.split()

    # The fixture waited for the HTTP listener; the HTTPS one (its own Gateway, its certificate) may come a moment
    # later.
    wait_for(lambda: over_tls()[1] == "200", 30, what="the h2c route answering over the HTTPS listener")
    body, _, client_version = over_tls()
    assert client_version == "2"
    seen = answer_fields(body)
    assert seen["protocol"] == "HTTP/2.0" and seen["path"] == "/over-tls"


def test_h2c_prior_knowledge_from_the_client_is_not_served_on_the_http_port(stage, h2c_host):
    """The suite's request itself (HTTP/2 with prior knowledge on the plain HTTP listener): nginx 1.22 takes one
    protocol per plain port, and the HTTP port speaks HTTP/1.1; HTTP/2 reaches it over TLS (ALPN)."""
    result = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--http2-prior-knowledge",
                             "-H", "Host: h2c.example.com", f"http://127.0.0.1:{stage.controller.http_port}/"],
                            capture_output=True, text=True, timeout=10)
    assert result.stdout != "200"


@pytest.fixture(scope="module")
def websocket_backends(tmp_path_factory):
    """The echo on a plain port and on a TLS one (its certificate from a test CA)."""
    pair = TestCA(tmp_path_factory.mktemp("ws-pki")).issue("ws.example.com")
    directory = tmp_path_factory.mktemp("ws-tls")
    (directory / "tls.crt").write_text(pair.cert)
    (directory / "tls.key").write_text(pair.key)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    with serving(EchoHandler, server_class=socketserver.ThreadingTCPServer) as plain, \
            serving(EchoHandler, tls=tls, server_class=socketserver.ThreadingTCPServer) as secure:
        yield port_of(plain), port_of(secure)


@pytest.mark.parametrize("app_protocol", [None, "kubernetes.io/ws", "kubernetes.io/wss"])
def test_websocket_reaches_the_backend_whatever_its_app_protocol(stage, flaky, websocket_backends, app_protocol):
    """HTTPRouteBackendProtocolWebSocket: the handshake, then a text and a binary frame echoed; kubernetes.io/wss
    speaks TLS to the backend."""
    plain, secure = websocket_backends
    name = {None: "ws-none", "kubernetes.io/ws": "ws-ws", "kubernetes.io/wss": "ws-wss"}[app_protocol]
    host = f"{name}.example.com"
    stage.cluster.apply(*service(name, 8082, "127.0.0.1", secure if app_protocol == "kubernetes.io/wss" else plain,
                                 app_protocol), route(f"backend-protocol-{name}", host, rule(name, 8082)))

    def dial() -> tuple[socket.socket, str, dict[str, str], bytes, str]:
        sock = socket.create_connection(("127.0.0.1", stage.controller.http_port), timeout=10)
        return sock, *handshake(sock, host)
    wait_for(lambda: dial()[1].startswith("HTTP/1.1 101 "), 30, what=f"the WebSocket handshake through {host}")
    sock, status, headers, rest, key = dial()
    with sock:
        assert status.startswith("HTTP/1.1 101 ") and headers["sec-websocket-accept"] == accept_key(key)
        sock.sendall(frame(b"Websocket Support!", TEXT, masked=True))
        opcode, payload, rest = read_frame(sock, rest)
        assert (opcode, payload) == (TEXT, b"Websocket Support!")
        sock.sendall(frame(bytes([1, 2, 3, 4, 5, 6, 7]), BINARY, masked=True))
        opcode, payload, rest = read_frame(sock, rest)
        assert (opcode, payload) == (BINARY, bytes([1, 2, 3, 4, 5, 6, 7]))
