"""Controller ConfigMap keys as a client sees them through a running controller (manifests mode)."""
from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for, wait_until_steady

CONFIGMAP = "ingress/controller"
HOST = "keys.example.com"


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


@pytest.fixture(scope="module")
def log_dir():
    # Not under pytest's 0700 tmp_path: nginx opens the log as root, but keep it readable for the assertions.
    directory = Path(tempfile.mkdtemp(prefix="pyngress-keys-", dir="/tmp"))
    os.chmod(directory, 0o755)
    yield directory


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"),
                                                     extra_args=[f"--configmap={CONFIGMAP}"])
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("KEYS", "keys"), k8s.ingress("keys", [k8s.rule(HOST, ("/", "Prefix", "keys", 80))]))
    stage.expect(HOST, "/", "KEYS")
    yield stage
    controller.stop()


def status(stage: Stage) -> dict:
    return requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/status", timeout=5).json()


def problems(stage: Stage) -> list[str]:
    return status(stage)["problems"]


def get(stage: Stage, path: str = "/", **headers: str) -> requests.Response:
    return requests.get(f"http://127.0.0.1:{stage.controller.http_port}{path}", headers={"Host": HOST, **headers},
                        timeout=5, allow_redirects=False)


def test_response_and_request_headers(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"use-gzip": "true", "gzip-types": "application/json", "gzip-min-length": "10",
                                     "hide-headers": "X-Backend", "server-tokens": "true",
                                     "generate-request-id": "false"}))
    wait_for(lambda: get(stage, **{"Accept-Encoding": "gzip"}).headers.get("Content-Encoding") == "gzip", 15,
             what="gzip on")
    response = requests.get(f"http://127.0.0.1:{stage.controller.http_port}/", headers={
        "Host": HOST, "Accept-Encoding": "gzip"}, stream=True, timeout=5)
    assert json.loads(gzip.decompress(response.raw.read()))["backend"] == "KEYS"
    plain = get(stage, **{"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in plain.headers  # the client did not ask for gzip
    assert "X-Backend" not in plain.headers  # hide-headers
    assert plain.headers["Server"].startswith("nginx/")  # server-tokens: the version
    assert "x-request-id" not in plain.json()["headers"]  # generate-request-id false: none made up
    assert get(stage, **{"X-Request-ID": "abc"}).json()["headers"]["x-request-id"] == "abc"

    stage.cluster.apply(configmap())  # back to the defaults
    wait_for(lambda: "X-Backend" in get(stage).headers, 15, what="defaults back")
    default = get(stage, **{"Accept-Encoding": "gzip"})
    assert "Server" not in default.headers and "Content-Encoding" not in default.headers  # server-tokens "false"
    assert len(default.json()["headers"]["x-request-id"]) == 32


def test_client_header_buffers(stage: Stage) -> None:
    big = {"X-Big": "x" * 1500}
    assert get(stage, **big).status_code == 200  # default: 4 buffers of 8k
    stage.cluster.apply(configmap(**{"large-client-header-buffers": "2 1k"}))
    wait_for(lambda: get(stage, **big).status_code == 400, 15, what="a 1.5 KiB header refused")
    assert get(stage).status_code == 200


def test_redirect_code_and_locations_kept_on_plain_http(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"force-ssl-redirect": "true", "http-redirect-code": "301",
                                     "no-tls-redirect-locations": "/plain,/.well-known/acme-challenge"}))
    wait_for(lambda: get(stage, "/x").status_code == 301, 15, what="301 to HTTPS")
    assert get(stage, "/x").headers["Location"] == f"https://{HOST}/x"
    assert get(stage, "/plain/file").status_code == 200
    assert get(stage, "/.well-known/acme-challenge/token").status_code == 200
    # Both are carried by the routes table: a change re-pushes it and reloads nothing.
    reloads = stage.controller.settled_reloads()
    stage.cluster.apply(configmap(**{"force-ssl-redirect": "true", "http-redirect-code": "307",
                                     "no-tls-redirect-locations": "/other"}))
    wait_for(lambda: get(stage, "/x").status_code == 307, 15, what="307 to HTTPS")
    assert get(stage, "/plain/file").status_code == 307 and get(stage, "/other/file").status_code == 200
    assert stage.controller.metric("nginx_ingress_controller_success") == reloads


def test_a_bad_value_keeps_the_previous_one(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"force-ssl-redirect": "true", "http-redirect-code": "307"}))
    wait_for(lambda: get(stage, "/x").status_code == 307, 15, what="307 to HTTPS")
    stage.cluster.apply(configmap(**{"force-ssl-redirect": "true", "http-redirect-code": "200"}))
    message = ("key http-redirect-code value '200': must be one of 301, 302, 307, 308; the previous value '307' "
               "keeps applying")
    wait_for(lambda: any(message in line for line in problems(stage)), 15, what="the bad value reported")
    assert get(stage, "/x").status_code == 307


def test_skip_access_log_urls(stage: Stage, log_dir: Path) -> None:
    log = log_dir / "access.log"
    stage.cluster.apply(configmap(**{"access-log-path": str(log), "access-log-params": "",
                                     "skip-access-log-urls": "/skipped"}))
    wait_for(lambda: log.exists() and (get(stage, "/logged"), "/logged" in log.read_text())[1], 15,
             what="requests logged to the file")
    get(stage, "/skipped")
    get(stage, "/logged-after")
    wait_for(lambda: "/logged-after" in log.read_text(), 10, what="the later request logged")
    assert "/skipped" not in log.read_text()


def test_what_the_routes_table_carries_reloads_nothing_and_a_directive_reloads_once(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"force-ssl-redirect": "true"}))
    wait_for(lambda: get(stage, "/x").status_code == 308, 15, what="redirected to HTTPS")
    reloads = stage.controller.metric("nginx_ingress_controller_success")
    stage.cluster.apply(configmap(**{"force-ssl-redirect": "false"}))
    wait_for(lambda: get(stage, "/x").status_code == 200, 15, what="served on plain HTTP")
    assert stage.controller.metric("nginx_ingress_controller_success") == reloads
    stage.cluster.apply(configmap(**{"force-ssl-redirect": "false", "proxy-read-timeout": "33"}))
    wait_for(lambda: b'proxy_read_timeout "33s"' in stage.controller.nginx_conf(), 15, what="the new timeout")
    wait_for(lambda: stage.controller.metric("nginx_ingress_controller_success") == reloads + 1, 15,
             what="one reload for proxy-read-timeout")


def forwarded(stage: Stage, **headers: str) -> tuple[str, str]:
    seen = get(stage, **headers).json()["headers"]
    return seen["x-forwarded-for"], seen["x-real-ip"]


def test_the_client_address_from_a_trusted_header(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"enable-real-ip": "true", "forwarded-for-header": "X-Client",
                                     "proxy-real-ip-cidr": "127.0.0.0/8"}))
    wait_for(lambda: forwarded(stage, **{"X-Client": "10.1.2.3"}) == ("10.1.2.3", "10.1.2.3"), 15,
             what="the address from X-Client")
    stage.cluster.apply(configmap(**{"enable-real-ip": "true", "forwarded-for-header": "X-Client",
                                     "proxy-real-ip-cidr": "192.0.2.0/24"}))
    wait_for(lambda: forwarded(stage, **{"X-Client": "10.1.2.3"}) == ("127.0.0.1", "127.0.0.1"), 15,
             what="X-Client ignored from an untrusted peer")


def test_forwarded_for_chain_only_with_compute_full_forwarded_for(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"use-forwarded-headers": "true"}))
    wait_for(lambda: forwarded(stage, **{"X-Forwarded-For": "198.51.100.7"}) == ("198.51.100.7", "198.51.100.7"),
             15, what="the client from X-Forwarded-For")
    stage.cluster.apply(configmap(**{"use-forwarded-headers": "true", "compute-full-forwarded-for": "true"}))
    wait_for(lambda: forwarded(stage, **{"X-Forwarded-For": "198.51.100.7"})[0] == "198.51.100.7, 127.0.0.1", 15,
             what="the chain with the connecting address")


def test_worker_processes_and_upstream_keepalive(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"worker-processes": "1", "upstream-keepalive-connections": "0"}))
    wait_for(lambda: len(nginx_workers(stage)) == 1, 20, what="one nginx worker")
    first, second = get(stage).json()["client"], get(stage).json()["client"]
    assert first != second  # no keepalive to the backend: each request on a new connection (a new source port)
    stage.cluster.apply(configmap(**{"worker-processes": "1"}))
    wait_for(lambda: b"keepalive 320;" in stage.controller.nginx_conf() and len(nginx_workers(stage)) == 1, 20,
             what="keepalive back")
    get(stage)
    assert get(stage).json()["client"] == get(stage).json()["client"]  # one kept connection, one worker


def nginx_workers(stage: Stage) -> list[int]:
    master = stage.controller.pid("nginx")
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


def test_headers_from_configmaps_to_clients_and_backends(stage: Stage) -> None:
    namespace = CONFIGMAP.split("/")[0]
    stage.cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "to-clients", "namespace": namespace},
         "data": {"X-Served-By": "pyngress edge"}},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "to-backends", "namespace": namespace},
         "data": {"X-Team": "payments", "X-Forwarded-For": "1.2.3.4", "X-Var": "ip=${remote_addr}",
                  "X-Unknown": "$no_such_variable"}},
        configmap(**{"add-headers": f"{namespace}/to-clients", "proxy-set-headers": f"{namespace}/to-backends"}))
    # Each manifest is a file of its own: wait until the watcher has read all three.
    wait_until_steady(lambda: (lambda r: r.headers.get("X-Served-By") == "pyngress edge" and
                               r.json()["headers"].get("x-team") == "payments" and
                               "x-var" in r.json()["headers"])(get(stage)), 15, what="both headers")
    seen = get(stage).json()["headers"]
    assert seen["x-forwarded-for"] == "127.0.0.1" and "x-unknown" not in seen  # refused entries
    assert seen["x-var"] == "ip=127.0.0.1"  # nginx's variables are evaluated, as ingress-nginx's template lets them
    refusals = ("entry 'X-Forwarded-For': pyngress sets this header itself; skipped",
                "entry 'X-Unknown': names variables nginx does not define: $no_such_variable")
    # The status record follows the reload by a moment.
    wait_for(lambda: all(r in " ".join(status(stage)["problems"]) for r in refusals), 10, what="refusals reported")


def test_default_allow_and_deny_lists_apply_to_ingresses_without_their_own(stage: Stage) -> None:
    stage.cluster.apply(*stage.backend("OWN", "own"), k8s.ingress(
        "own", [k8s.rule("own.example.com", ("/", "Prefix", "own", 80))],
        annotations={"nginx.ingress.kubernetes.io/allowlist-source-range": "127.0.0.0/8"}))
    stage.expect("own.example.com", "/", "OWN")
    stage.cluster.apply(configmap(**{"whitelist-source-range": "192.0.2.0/24"}))
    wait_for(lambda: get(stage).status_code == 403, 15, what="the default allowlist refusing 127.0.0.1")
    assert stage.served_by("own.example.com", "/") == "OWN"  # its own allowlist lets 127.0.0.1 in
    stage.cluster.apply(configmap(**{"denylist-source-range": "127.0.0.1"}))
    wait_for(lambda: get(stage).status_code == 403 and stage.served_by("own.example.com", "/") == "403", 15,
             what="the default denylist on both")
    stage.cluster.apply(configmap())
    wait_for(lambda: get(stage).status_code == 200, 15, what="open again")


def test_brotli(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"enable-brotli": "true", "brotli-types": "application/json",
                                     "brotli-min-length": "10"}))
    wait_for(lambda: get(stage, **{"Accept-Encoding": "br"}).headers.get("Content-Encoding") == "br", 15,
             what="brotli on")
    assert "Content-Encoding" not in get(stage, **{"Accept-Encoding": "identity"}).headers


def _server_temp_key(stage: Stage, host: str) -> str:
    """The DH key of a TLS 1.2 handshake offering only a DHE cipher, as openssl s_client reports it ("": no
    handshake)."""
    port = stage.controller.https_port
    out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", host, "-tls1_2",
                          "-cipher", "DHE-RSA-AES128-GCM-SHA256"], input="", capture_output=True, text=True,
                         timeout=30).stdout
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Server Temp Key")), "")


def test_ssl_dh_param(stage: Stage, tmp_path: Path) -> None:
    host = "dhe.example.com"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out",
                    "cert.pem", "-days", "2", "-subj", f"/CN={host}", "-addext", f"subjectAltName=DNS:{host}"],
                   cwd=tmp_path, check=True, capture_output=True)
    params = subprocess.run(["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe3072"],
                            check=True, capture_output=True).stdout
    encode = lambda data: base64.b64encode(data).decode()  # noqa: E731
    stage.cluster.apply(
        {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": {"name": "dhe", "namespace": "default"},
         "data": {"tls.crt": encode((tmp_path / "cert.pem").read_bytes()), "tls.key": encode((tmp_path / "key.pem").read_bytes())}},
        *stage.backend("KEYS", "dhe"),
        k8s.ingress("dhe", [k8s.rule(host, ("/", "Prefix", "dhe", 80))], tls=[{"hosts": [host], "secretName": "dhe"}]))
    stage.expect(host, "/", "308")  # served, as a TLS host
    # nginx sets no DH parameters of its own: a client that offers only DHE gets no handshake.
    assert _server_temp_key(stage, host) == ""

    stage.cluster.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                         "metadata": {"name": "dhparam", "namespace": "ingress"}, "data": {"dhparam.pem": encode(params)}},
                        configmap(**{"ssl-dh-param": "ingress/dhparam"}))
    wait_for(lambda: _server_temp_key(stage, host).startswith("DH, 3072 bits"), 20, what="the Secret's DH group")

    stage.cluster.apply({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                         "metadata": {"name": "dhparam", "namespace": "ingress"}, "data": {"dhparam.pem": encode(b"junk")}})
    wait_for(lambda: any("key ssl-dh-param: Secret ingress/dhparam key dhparam.pem: OpenSSL cannot read it" in p
                         for p in problems(stage)), 15, what="the bad parameters reported")
    # Without parameters again, once the reload (which --sync-rate-limit may make wait) is done.
    wait_for(lambda: _server_temp_key(stage, host) == "", 10, what="the DH parameters dropped")
    stage.cluster.apply(configmap())


def test_custom_headers_allowed_by_the_configmap(stage: Stage) -> None:
    prefix = "nginx.ingress.kubernetes.io"
    stage.cluster.apply(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app-headers", "namespace": "default"},
         "data": {"X-Team": "payments", "Cache-Control": "no-store", "X-Dollar": "$remote_addr ${host}",
                  "X-Backend": "replaced"}},
        *stage.backend("KEYS", "custom"),
        k8s.ingress("custom", [k8s.rule("custom.example.com", ("/", "Prefix", "custom", 80))],
                    annotations={f"{prefix}/custom-headers": "app-headers"}))

    def answer() -> requests.Response:
        return requests.get(f"http://127.0.0.1:{stage.controller.http_port}/?status=404",
                            headers={"Host": "custom.example.com"}, timeout=5)
    # Not allowed by the administrator: the paths are denied, never served without what the Ingress asked.
    wait_for(lambda: answer().status_code == 503, 15, what="denied while the headers are not allowed")
    wait_for(lambda: any("custom-headers: Cache-Control, X-Backend, X-Dollar, X-Team not allowed: the controller "
                         "ConfigMap's global-allowed-response-headers must list it" in p for p in problems(stage)), 15,
             what="the refusal reported")
    stage.cluster.apply(configmap(**{"global-allowed-response-headers": "X-Team,Cache-Control,X-Dollar,X-Backend"}))
    wait_for(lambda: answer().status_code == 404, 15, what="served once allowed")
    response = answer()  # on every answer, errors included
    assert (response.headers["X-Team"], response.headers["Cache-Control"]) == ("payments", "no-store")
    # As ingress-nginx, a `$` is sent as written: nginx expands no variable of a custom-headers value.
    assert response.headers["X-Dollar"] == "$remote_addr ${host}"
    # The echo backend's own X-Backend is replaced, not sent beside it.
    assert response.raw.headers.getlist("X-Backend") == ["replaced"]
    assert "x-team" not in get(stage).headers  # another Ingress's answers do not get them
    stage.cluster.apply(configmap())


PAUSE = 2.0  # seconds between the two halves of the backend's body (echo backend: ?pause=)


def seconds_to_first_body_byte(stage: Stage) -> float:
    """For a backend that sends half its body, then the rest PAUSE seconds later."""
    started = time.monotonic()
    with requests.get(f"http://127.0.0.1:{stage.controller.http_port}/?pause={PAUSE}", headers={"Host": HOST},
                      stream=True, timeout=10) as response:
        body = response.iter_content(64)
        first = next(body)
        seconds = time.monotonic() - started
        whole = first + b"".join(body)
    assert json.loads(whole)["backend"] == "KEYS"
    return seconds


def passed_on(stage: Stage) -> bool:
    """Whether the first half reached the client well before the second was sent (retried under load)."""
    return seconds_to_first_body_byte(stage) < PAUSE - 0.5


def held(stage: Stage) -> bool:
    """Whether nothing of the body reached the client before the backend had sent all of it."""
    return seconds_to_first_body_byte(stage) >= PAUSE - 0.1


def test_proxy_buffering_takes_nginx_words_as_ingress_nginx_does(stage: Stage) -> None:
    # By default (off) what the backend sent reaches the client at once; "on" (ingress-nginx's value; pyngress
    # once wanted "true" here and refused it) holds it until the response is complete.
    wait_for(lambda: passed_on(stage), 20, what="responses passed on as they come")
    stage.cluster.apply(configmap(**{"proxy-buffering": "on"}))
    wait_for(lambda: held(stage), 20, what="responses buffered")
    assert not [p for p in problems(stage) if "proxy-buffering" in p]
    stage.cluster.apply(configmap(**{"proxy-buffering": "sometimes"}))
    wait_for(lambda: any("proxy-buffering" in p and 'must be "on" or "off"' in p for p in problems(stage)), 15,
             what="the refused value reported")
    assert held(stage)  # the value accepted last stays in force
    stage.cluster.apply(configmap())
    wait_for(lambda: passed_on(stage), 20, what="the default (off) back")
