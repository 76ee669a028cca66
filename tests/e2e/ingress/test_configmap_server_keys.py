"""Controller ConfigMap keys whose effect needs a client, through a running controller (manifests mode): syslog,
the error log, TLS handshakes and session tickets, the backend's own headers, retries, rate limits, gzip's
exceptions, and the keys that are annotation defaults."""
from __future__ import annotations

import base64
import gzip
import os
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.e2e.tls.pki import Pair, TestCA, tls_secret
from tests.support import k8s
from tests.e2e.ingress.conftest import reachable
from tests.support.net import free_port, wait_for

CONFIGMAP = "ingress/controller"
HOST = "server-keys.example.com"
PREFIX = "nginx.ingress.kubernetes.io"
BIG_BODY = b"x" * 48 * 1024


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


class _HeadersBackend(BaseHTTPRequestHandler):
    """A backend that names itself in Server, sets a cookie for its own path and domain, redirects to its own
    URL, and serves a large body."""
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return "my-backend/1.0"

    def do_GET(self) -> None:
        if self.path.endswith("/redirect"):
            self.send_response(302)
            self.send_header("Location", "http://backend.local/next")
            body = b""
        else:
            self.send_response(200)
            self.send_header("Set-Cookie", "session=1; Path=/; Domain=backend.local")
            body = BIG_BODY if self.path.endswith("/big") else b"ok"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def headers_backend() -> Iterator[tuple[str, int]]:
    address = ("127.0.77.2", free_port())
    server = ThreadingHTTPServer(address, _HeadersBackend)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield address
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def dropping_backend(echo) -> Iterator[str]:
    """An endpoint that reads each request and closes the connection without an answer (a crashed worker)."""
    ip = "127.0.77.3"
    listener = socket.create_server((ip, echo.port))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield ip
    stop.set()
    thread.join()
    listener.close()


@pytest.fixture(scope="module")
def log_dir() -> Path:
    # Not under pytest's 0700 tmp_path: nginx's workers (nobody) write there through the master's descriptor, but
    # the test reads it back.
    directory = Path(tempfile.mkdtemp(prefix="pyngress-server-keys-", dir="/tmp"))
    os.chmod(directory, 0o755)
    return directory


@pytest.fixture(scope="module")
def stage(echo, headers_backend) -> Iterator[Stage]:
    # Where nginx's workers can write the buffered responses' temporary files (limit-rate with proxy-buffering).
    with reachable([f"--configmap={CONFIGMAP}"]) as (controller, cluster):
        stage = Stage(controller, cluster, echo)
        _serve_the_hosts(stage, headers_backend)
        yield stage


def _serve_the_hosts(stage: Stage, headers_backend: tuple[str, int]) -> None:
    ip, port = headers_backend
    stage.cluster.apply(*stage.backend("SERVER-KEYS", "server-keys"),
                        k8s.service("headers"), k8s.endpoint_slice("headers", [ip], port),
                        k8s.ingress("server-keys", [k8s.rule(HOST, ("/", "Prefix", "server-keys", 80),
                                                              ("/backend", "Prefix", "headers", 80))]),
                        k8s.ingress("own-rate", [k8s.rule("own-rate.example.com", ("/", "Prefix", "headers", 80))],
                                    annotations={f"{PREFIX}/limit-rate": "0"}))
    stage.expect(HOST, "/", "SERVER-KEYS")


def apply_and_wait(stage: Stage, data: dict[str, str], conf_holds: str) -> None:
    """Apply the ConfigMap and wait until nginx runs the configuration holding `conf_holds`."""
    reloads = stage.controller.settled_reloads()
    stage.cluster.apply(configmap(**data))
    wait_for(lambda: conf_holds.encode() in stage.controller.nginx_conf(), 15, what=f"nginx.conf with {conf_holds}")
    wait_for(lambda: stage.controller.metric("nginx_ingress_controller_success") > reloads, 15, what="the reload")


def get(stage: Stage, path: str = "/", host: str = HOST, **headers: str) -> requests.Response:
    return requests.get(f"http://127.0.0.1:{stage.controller.http_port}{path}", headers={"Host": host, **headers},
                        timeout=10, allow_redirects=False)


def test_syslog_receives_the_access_log(stage: Stage) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(5)
        port = receiver.getsockname()[1]
        apply_and_wait(stage, {"enable-syslog": "true", "syslog-host": "127.0.0.1", "syslog-port": str(port)},
                       f"syslog:server=127.0.0.1:{port}")
        assert get(stage, "/syslog-probe").status_code == 200
        lines = []
        while not any(b"GET /syslog-probe" in line for line in lines):
            lines.append(receiver.recvfrom(65536)[0])
    line = next(line for line in lines if b"GET /syslog-probe" in line)
    assert line.startswith(b"<") and b"nginx:" in line  # an RFC 3164 message with nginx's tag
    assert b"[default-server-keys-80]" in line  # the upstreaminfo format's upstream name


def test_error_log_path_with_debug_connections(stage: Stage, log_dir: Path) -> None:
    log = log_dir / "error.log"
    apply_and_wait(stage, {"error-log-path": str(log), "debug-connections": "127.0.0.1"}, str(log))
    assert get(stage, "/debug-probe").status_code == 200
    wait_for(lambda: log.exists() and "http request line: \"GET /debug-probe" in log.read_text(), 10,
             what="the request's debug lines in the error log file")
    assert "[debug]" in log.read_text()


def _client_context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.maximum_version = ssl.TLSVersion.TLSv1_2  # the ticket arrives in the handshake
    return context


CLIENT = _client_context()  # one context: a session resumes only in the context that made it


def tls_handshake(stage: Stage, server_name: str | None, session: ssl.SSLSession | None = None) -> ssl.SSLSocket:
    raw = socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=5)
    try:
        return CLIENT.wrap_socket(raw, server_hostname=server_name, session=session)
    except BaseException:
        raw.close()
        raise


def test_ssl_reject_handshake_refuses_names_no_ingress_serves(stage: Stage) -> None:
    with tls_handshake(stage, "unknown.example.com"):
        pass  # by default the fake certificate answers every name
    apply_and_wait(stage, {"ssl-reject-handshake": "true"}, "ssl_reject_handshake = true")
    with tls_handshake(stage, HOST) as tls:  # an Ingress's host: its (here the default) certificate
        assert tls.getpeercert(binary_form=True)
    for name in ("unknown.example.com", None):
        with pytest.raises(ssl.SSLError):
            tls_handshake(stage, name).close()


def _reused_after_a_reload(stage: Stage, data: dict[str, str]) -> bool:
    apply_and_wait(stage, data, 'ssl_session_tickets "on"')
    with tls_handshake(stage, HOST) as tls:
        session = tls.session
    assert session is not None and session.has_ticket
    apply_and_wait(stage, {**data, "proxy-read-timeout": "33"}, 'proxy_read_timeout "33s"')
    wait_for(lambda: tls_handshake(stage, HOST).close() is None, 10, what="TLS after the reload")
    with tls_handshake(stage, HOST, session) as tls:
        return tls.session_reused


def test_ssl_session_ticket_key_keeps_tickets_valid_across_reloads(stage: Stage) -> None:
    # Without the shared session cache, only the ticket can resume a session.
    tickets = {"ssl-session-tickets": "true", "ssl-session-cache": "false"}
    assert not _reused_after_a_reload(stage, tickets)  # nginx's own key is new at each load
    key = base64.b64encode(os.urandom(80)).decode()
    assert _reused_after_a_reload(stage, {**tickets, "ssl-session-ticket-key": key})


def test_backend_headers_server_cookie_and_redirect(stage: Stage) -> None:
    apply_and_wait(stage, {"proxy-read-timeout": "34"}, 'proxy_read_timeout "34s"')
    plain = get(stage, "/backend")
    assert "Server" not in plain.headers  # server-tokens false: no Server header at all
    assert plain.headers["Set-Cookie"] == "session=1; Path=/; Domain=backend.local"
    apply_and_wait(stage, {"allow-backend-server-header": "true", "proxy-cookie-path": "/ /backend",
                           "proxy-cookie-domain": "backend.local server-keys.example.com",
                           "proxy-redirect-from": "http://backend.local/", "proxy-redirect-to": "/backend/"},
                   "proxy_pass_header Server;")
    response = get(stage, "/backend")
    assert response.headers["Server"] == "my-backend/1.0"
    assert response.headers["Set-Cookie"] == "session=1; Path=/backend; Domain=server-keys.example.com"
    assert get(stage, "/backend/redirect").headers["Location"] == f"http://{HOST}/backend/next"
    assert "Server" not in get(stage, "/missing", host="nobody.example.com").headers  # nginx's own 404


def test_proxy_add_original_uri_header(stage: Stage) -> None:
    apply_and_wait(stage, {"proxy-add-original-uri-header": "true"}, "X-Original-URI $request_uri;")
    assert get(stage, "/some/path?x=1").json()["headers"]["x-original-uri"] == "/some/path?x=1"


def test_gzip_disable_by_user_agent(stage: Stage) -> None:
    apply_and_wait(stage, {"use-gzip": "true", "gzip-types": "application/json", "gzip-min-length": "10",
                           "gzip-disable": "curl/.* msie6"}, 'gzip_disable "curl/.*"')
    browser = requests.get(f"http://127.0.0.1:{stage.controller.http_port}/", stream=True, timeout=5,
                           headers={"Host": HOST, "Accept-Encoding": "gzip", "User-Agent": "Mozilla/5.0"})
    assert browser.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(browser.raw.read())
    curl = get(stage, **{"Accept-Encoding": "gzip", "User-Agent": "curl/8.5.0"})
    assert "Content-Encoding" not in curl.headers and curl.json()["backend"] == "SERVER-KEYS"


def _download_seconds(stage: Stage, host: str) -> float:
    start = time.monotonic()
    response = get(stage, "/big" if host != HOST else "/backend/big", host=host)
    assert response.content == BIG_BODY
    return time.monotonic() - start


def test_limit_rate_is_every_ingress_default(stage: Stage) -> None:
    assert _download_seconds(stage, HOST) < 1
    # nginx limits what it buffers from the backend (as ingress-nginx documents: with proxy-buffering on).
    apply_and_wait(stage, {"limit-rate": "16", "proxy-buffering": "on"}, 'limit_rate "16k"')
    # 48 KiB at 16 KiB/s (once the routes name the new location profile, pushed after the reload)
    wait_for(lambda: _download_seconds(stage, HOST) > 1.5, 20, what="a download at 16 KiB/s")
    assert _download_seconds(stage, "own-rate.example.com") < 1  # its own limit-rate "0" overrides


def test_retry_non_idempotent_retries_a_post(stage: Stage, dropping_backend: str) -> None:
    host = "retry.example.com"
    keys_ip = stage.echo.ips["SERVER-KEYS"]
    stage.cluster.apply(k8s.service("retry"), k8s.endpoint_slice("retry", [dropping_backend, keys_ip], stage.echo.port),
                        k8s.ingress("retry", [k8s.rule(host, ("/", "Prefix", "retry", 80))]))
    apply_and_wait(stage, {"proxy-read-timeout": "35"}, 'proxy_read_timeout "35s"')
    stage.expect(host, "/", "SERVER-KEYS")  # a GET is retried on the other endpoint

    def posts() -> set[int]:
        return {stage.controller.request("POST", "/", host, data=b"order=1").status_code for _ in range(6)}

    assert 502 in posts()  # the endpoint that dropped the POST: nginx does not send it again
    apply_and_wait(stage, {"retry-non-idempotent": "true"}, '"non_idempotent"')
    assert posts() == {200}


def test_limit_conn_zone_variable_keys_the_rate_limits(stage: Stage) -> None:
    host = "zone.example.com"
    stage.cluster.apply(k8s.ingress("zone", [k8s.rule(host, ("/", "Prefix", "server-keys", 80))],
                                    annotations={f"{PREFIX}/limit-rpm": "1", f"{PREFIX}/limit-burst-multiplier": "1"}))
    stage.expect(host, "/", "SERVER-KEYS")

    def statuses(*users: str) -> list[int]:
        return [get(stage, "/", host=host, **{"X-User": user}).status_code for user in users]

    assert 503 in statuses("a", "b", "c")  # by default one client address: one count for all
    apply_and_wait(stage, {"limit-conn-zone-variable": "$http_x_user"}, "0 $http_x_user;")
    assert statuses("d", "e", "f") == [200, 200, 200]  # each user counted on its own
    assert statuses("d", "d", "d")[-1] == 503


def test_service_upstream_is_every_ingress_default(stage: Stage) -> None:
    echo = stage.echo
    cluster_ip = echo.ips.get("CLUSTER-IP") or echo.start("CLUSTER-IP")
    service, slice_ = stage.backend("POD", service="upstream")
    service["spec"]["clusterIP"] = cluster_ip
    service["spec"]["ports"][0]["port"] = echo.port  # the cluster IP answers on the Service port
    slice_["ports"][0]["port"] = echo.port
    stage.cluster.apply(service, slice_, k8s.ingress("by-default", [k8s.rule(
        "default.upstream.example", ("/", "Prefix", "upstream", echo.port))]), k8s.ingress("own", [k8s.rule(
            "own.upstream.example", ("/", "Prefix", "upstream", echo.port))],
            annotations={f"{PREFIX}/service-upstream": "false"}))
    stage.expect("default.upstream.example", "/", "POD")
    stage.cluster.apply(configmap(**{"service-upstream": "true"}))
    stage.expect("default.upstream.example", "/", "CLUSTER-IP")
    stage.expect("own.upstream.example", "/", "POD")
    stage.cluster.apply(configmap())
    stage.expect(HOST, "/", "SERVER-KEYS")


def _status_at(stage: Stage, ip: str, port: int) -> int | None:
    """The status of a request for HOST to ip:port; None when nothing listens there."""
    try:
        return requests.get(f"http://{ip}:{port}/", headers={"Host": HOST}, timeout=2).status_code
    except requests.ConnectionError:
        return None


def test_bind_address_listens_on_the_given_address_only(stage: Stage) -> None:
    port = stage.controller.http_port
    assert _status_at(stage, "127.0.0.2", port) == 200  # every address by default
    # nginx restarts for it (a reload cannot bind 127.0.0.1 beside 0.0.0.0), and serves the routes again.
    stage.cluster.apply(configmap(**{"bind-address": "127.0.0.1"}))
    wait_for(lambda: _status_at(stage, "127.0.0.2", port) is None and _status_at(stage, "127.0.0.1", port) == 200,
             30, what="nginx listening on 127.0.0.1 only")
    with socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=5):
        pass
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.2", stage.controller.https_port), timeout=5)
    stage.cluster.apply(configmap())
    wait_for(lambda: _status_at(stage, "127.0.0.2", port) == 200, 30, what="every address again")


OCSP_HOST = "ocsp.example.com"


@pytest.fixture
def ocsp_responder(tmp_path) -> Iterator[tuple[TestCA, Pair]]:
    """A CA, a certificate of OCSP_HOST naming its OCSP responder, and `openssl ocsp` answering that it is good."""
    ca = TestCA(tmp_path)
    port = free_port()
    pair = ca.issue(OCSP_HOST, extensions=(f"authorityInfoAccess=OCSP;URI:http://127.0.0.1:{port}/",))
    serial = subprocess.run(["openssl", "x509", "-noout", "-serial"], input=pair.cert.encode(), capture_output=True,
                            check=True).stdout.decode().strip().partition("=")[2]
    (tmp_path / "index.txt").write_text(f"V\t391231235959Z\t\t{serial}\tunknown\t/CN={OCSP_HOST}\n")
    log = tmp_path / "responder.log"
    with open(log, "wb") as output:
        responder = subprocess.Popen(
            ["openssl", "ocsp", "-index", str(tmp_path / "index.txt"), "-port", str(port), "-CA",
             str(ca.cert_path), "-rsigner", str(ca.cert_path), "-rkey", str(tmp_path / "ca.key"), "-ignore_err"],
            stdout=output, stderr=subprocess.STDOUT)
    # Not by connecting: the responder serves one connection at a time, and one that sends nothing stalls it.
    wait_for(lambda: b"waiting for OCSP client connections" in log.read_bytes(), 10, what="the OCSP responder")
    yield ca, pair
    responder.kill()
    responder.wait()


def _stapled_status(stage: Stage, host: str) -> str:
    out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{stage.controller.https_port}",
                          "-servername", host, "-status"], input=b"", capture_output=True, timeout=10).stdout.decode()
    return "good" if "Cert Status: good" in out else "none" if "OCSP response: no response sent" in out else out


def test_enable_ocsp_staples_the_responders_answer(stage: Stage, ocsp_responder) -> None:
    ca, pair = ocsp_responder
    # The issuer follows the certificate in tls.crt: the OCSP request names both.
    chain = Pair(pair.cert + ca.cert_path.read_text(), pair.key)
    stage.cluster.apply(tls_secret("ocsp-tls", chain), k8s.ingress(
        "ocsp", [k8s.rule(OCSP_HOST, ("/", "Prefix", "server-keys", 80))],
        tls=[{"hosts": [OCSP_HOST], "secretName": "ocsp-tls"}]))
    stage.expect(OCSP_HOST, "/", "308")  # served: plain HTTP goes to HTTPS
    assert _stapled_status(stage, OCSP_HOST) == "none"  # not without the key
    apply_and_wait(stage, {"enable-ocsp": "true"}, "lua_shared_dict pyngress_ocsp")
    # The first handshake starts the fetch; a later one staples the answer.
    wait_for(lambda: _stapled_status(stage, OCSP_HOST) == "good", 20, what="a stapled OCSP response, status good")
