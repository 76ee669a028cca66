"""The examples of ingress-nginx's user guide (docs/examples/ in its repository), each written again as a manifest
of this module's own and served through the whole controller as the guide says it is served.

One controller serves them all, each example on its own host, with one controller ConfigMap holding what the
guide puts there (custom headers, the JWT buffer size, DH parameters, snippets allowed). Where the guide reaches
the Internet (httpbin.org, GitHub's OAuth) a local service plays the part, answering as that one does.

Left out, with why: static-ip and sysctl change the cluster's Service and the pod's kernel settings, not the
controller; openpolicyagent is a Gatekeeper policy the API server applies; PREREQUISITES is set-up.
"""
from __future__ import annotations

import base64
import email.utils
import json
import re
import subprocess
import time
from http.server import BaseHTTPRequestHandler
from typing import Iterator
from urllib.parse import parse_qs, unquote, urlsplit

import pytest
import requests

from tests.e2e.ingress.conftest import reachable
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.tls.pki import TestCA, https_get, served_certificate, tls_secret
from tests.support import k8s
from tests.support.client_pki import Pki
from tests.support.h2c_backend import answer_fields, h2c_backend
from tests.support.htpasswd import basic_auth_secret
from tests.support.net import wait_for
from tests.support.http_servers import port_of, serving

PREFIX = "nginx.ingress.kubernetes.io"
CONFIGMAP = "guide-config"
# ingress-nginx's default ssl-ciphers with one DHE suite, which the ssl-dh-param example needs to show.
CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
           "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
           "DHE-RSA-AES128-GCM-SHA256")
GUIDE_CONFIG = {
    "proxy-set-headers": "default/custom-headers", "add-headers": "default/custom-headers",  # custom-headers
    "proxy-buffer-size": "16k",  # jwt
    "ssl-dh-param": "default/lb-dhparam", "ssl-ciphers": CIPHERS,  # ssl-dh-param
    "allow-snippet-annotations": "true", "annotations-risk-level": "Critical",  # configuration-snippets
}
CUSTOM_HEADERS = {"X-Different-Name": "true", "X-Request-Start": "t=${msec}", "X-Using-Nginx-Controller": "true"}
JWT = "eyJhbGciOiJSUzI1NiJ9." + "A" * 9000 + ".signature"  # a large token, as the jwt example describes


def annotations(**values: str) -> dict[str, str]:
    return {f"{PREFIX}/{key.replace('_', '-')}": value for key, value in values.items()}


class _GuideServices(BaseHTTPRequestHandler):
    """The services the guide's examples call out to, on one local port:
    /basic-auth/user/passwd as httpbin.org answers it (external-auth), /oauth2/auth as oauth2-proxy answers it
    (oauth-external-auth), /auth as the demo auth service of external-auth-headers, and /jwt, a backend whose
    answer carries a JWT-sized header (jwt)."""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 - the base class's name
        path = urlsplit(self.path).path
        headers: dict[str, str] = {}
        if path == "/basic-auth/user/passwd":
            good = "Basic " + base64.b64encode(b"user:passwd").decode()
            code = 200 if self.headers.get("Authorization") == good else 401
            if code == 401:
                headers["WWW-Authenticate"] = 'Basic realm="Fake Realm"'
        elif path == "/oauth2/auth":
            code = 202 if "_oauth2_proxy=" in (self.headers.get("Cookie") or "") else 401
        elif path == "/auth":
            code = 200 if "internal" in (self.headers.get("User") or "") else 403
            if code == 200:
                headers.update({"UserID": "42", "UserRole": "admin", "Other": "not-passed"})
        elif path == "/jwt":
            code, headers["Authorization"] = 200, f"Bearer {JWT}"
        else:
            code = 404
        self.send_response(code)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def services() -> Iterator[int]:
    with serving(_GuideServices) as server:
        yield port_of(server)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("guide-pki"))


@pytest.fixture(scope="module")
def stage(echo, tmp_path_factory) -> Iterator[Stage]:
    directory = tmp_path_factory.mktemp("dhparam")
    subprocess.run(["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe2048",
                    "-out", str(directory / "dh.pem")], check=True,
                   capture_output=True)
    with reachable([f"--configmap=default/{CONFIGMAP}"]) as (controller, cluster):
        cluster.apply(k8s.config_map("custom-headers", CUSTOM_HEADERS),
                      k8s.secret("lb-dhparam", {"dhparam.pem": (directory / "dh.pem").read_text()}),
                      k8s.config_map(CONFIGMAP, GUIDE_CONFIG))
        yield Stage(controller, cluster, echo)


def serve(stage: Stage, name: str, host: str | None, path: str = "/", *, backend: str | None = None,
          tls: list[dict] | None = None, **values: str) -> None:
    """The guide's usual shape: one Ingress `name` sending `host` + `path` (Prefix) to the Service of the echo
    backend `backend` (default: name upper-cased), with annotations `values`."""
    backend = backend or name.upper()
    service = f"{name}-svc"
    stage.cluster.apply(*stage.backend(backend, service=service))
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, (path, "Prefix", service, 80))], tls=tls,
                                    annotations=annotations(**values)))


def test_affinity_cookie(stage):
    """affinity/cookie: the `route` cookie, valid two days, pins a client to one of the Service's endpoints."""
    host = "stickyingress.example.com"
    ips = [stage.echo.ips.get(name) or stage.echo.start(name) for name in ("STICKY1", "STICKY2", "STICKY3")]
    stage.cluster.apply(k8s.service("sticky-svc"), k8s.endpoint_slice("sticky-svc", ips, stage.echo.port))
    stage.cluster.apply(k8s.ingress("nginx-test", [k8s.rule(host, ("/", "Prefix", "sticky-svc", 80))],
                                    annotations=annotations(affinity="cookie", session_cookie_name="route",
                                                            session_cookie_expires="172800",
                                                            session_cookie_max_age="172800")))
    wait_for(lambda: stage.controller.get("/", host).status_code == 200, 15, what="the sticky host served")
    first = stage.controller.get("/", host)
    name_value, *attributes = [part.strip() for part in first.headers["set-cookie"].split(";")]
    assert name_value.startswith("route=")
    fields = {key.lower(): value for key, _, value in (attribute.partition("=") for attribute in attributes)}
    assert fields["max-age"] == "172800" and fields["path"] == "/"
    expires_in = email.utils.parsedate_to_datetime(fields["expires"]).timestamp() - time.time()
    assert 172800 - 120 < expires_in <= 172800 + 5
    cookie = {"route": name_value.split("=", 1)[1]}
    answered = {stage.controller.get("/", host, cookies=cookie).json()["backend"] for _ in range(12)}
    assert answered == {first.json()["backend"]}


def test_auth_basic(stage):
    """auth/basic: an htpasswd file in a Secret; the realm is the annotation's."""
    stage.cluster.apply(basic_auth_secret("basic-auth", {"foo": "bar"}))
    serve(stage, "ingress-with-auth", "auth-basic.example.com", auth_type="basic", auth_secret="basic-auth",
          auth_realm="Authentication Required - foo")
    wait_for(lambda: stage.controller.get("/", "auth-basic.example.com").status_code == 401, 15, what="auth asked")
    denied = stage.controller.get("/", "auth-basic.example.com")
    assert denied.headers["www-authenticate"] == 'Basic realm="Authentication Required - foo"'
    assert stage.controller.get("/", "auth-basic.example.com", auth=("foo", "wrong")).status_code == 401
    allowed = stage.controller.get("/", "auth-basic.example.com", auth=("foo", "bar"))
    assert allowed.status_code == 200 and allowed.json()["backend"] == "INGRESS-WITH-AUTH"


def test_auth_client_certs(stage, pki, tmp_path_factory):
    """auth/client-certs: verification on, depth 1, an error page for a failed verification, and the client's
    certificate passed to the backend."""
    host = "mydomain.example.com"
    clients = Pki(tmp_path_factory.mktemp("client-pki"))
    stage.cluster.apply(tls_secret("tls-secret", pki.issue(host)),
                        k8s.secret("ca-secret", {"ca.crt": clients.text("ca-a.crt")}))
    serve(stage, "client-certs", host, tls=[{"hosts": [host], "secretName": "tls-secret"}],
          auth_tls_verify_client="on", auth_tls_secret="default/ca-secret", auth_tls_verify_depth="1",
          auth_tls_error_page="http://www.mysite.com/error-cert.html",
          auth_tls_pass_certificate_to_upstream="true")
    good = (clients.dir / "good.crt", clients.dir / "good.key")
    port = stage.controller.https_port
    wait_for(lambda: https_get(port, host, client_cert=good).status == 200, 15, what="the client-cert host served")
    seen = json.loads(https_get(port, host, client_cert=good).body)["headers"]
    assert seen["ssl-client-verify"] == "SUCCESS"
    assert "CN=client-good" in seen["ssl-client-subject-dn"]
    assert unquote(seen["ssl-client-cert"]).startswith("-----BEGIN CERTIFICATE-----")
    for client in (None, (clients.dir / "intruder.crt", clients.dir / "intruder.key")):
        refused = https_get(port, host, client_cert=client)
        assert (refused.status, refused.headers["location"]) == (302, "http://www.mysite.com/error-cert.html")


def test_auth_external_auth(stage, services):
    """auth/external-auth: every request is first asked of the auth URL (httpbin's basic-auth check)."""
    host = "external-auth-01.sample.com"
    serve(stage, "external-auth", host, auth_url=f"http://127.0.0.1:{services}/basic-auth/user/passwd")
    wait_for(lambda: stage.controller.get("/", host).status_code == 401, 15, what="the external auth asked")
    assert stage.controller.get("/", host, auth=("user", "wrong")).status_code == 401
    allowed = stage.controller.get("/", host, auth=("user", "passwd"))
    assert allowed.status_code == 200 and allowed.json()["backend"] == "EXTERNAL-AUTH"


def test_auth_oauth_external_auth(stage, services):
    """auth/oauth-external-auth: auth-url and auth-signin built from $host and $escaped_request_uri, as the
    guide's oauth2-proxy Ingress writes them (here the auth service listens on its own port of the same host)."""
    serve(stage, "oauth", None, "/oauth-app", auth_url=f"http://$host:{services}/oauth2/auth",
          auth_signin="https://$host/oauth2/start?rd=$escaped_request_uri")
    wait_for(lambda: stage.controller.get("/oauth-app", "127.0.0.1").status_code == 302, 15, what="sign-in asked")
    signin = urlsplit(stage.controller.get("/oauth-app/page?x=1", "127.0.0.1").headers["location"])
    assert (signin.scheme, signin.netloc, signin.path) == ("https", "127.0.0.1", "/oauth2/start")
    assert parse_qs(signin.query)["rd"] == ["/oauth-app/page?x=1"]
    signed_in = stage.controller.get("/oauth-app/page", "127.0.0.1", cookies={"_oauth2_proxy": "session"})
    assert signed_in.status_code == 200 and signed_in.json()["backend"] == "OAUTH"


def test_canary_by_weight(stage):
    """canary: a second Ingress for the same host with canary-weight 50 takes about half the requests."""
    host = "echo.prod.mydomain.com"
    serve(stage, "production", host)
    stage.expect(host, "/", "PRODUCTION")
    serve(stage, "canary", host, canary="true", canary_weight="50")
    wait_for(lambda: "CANARY" in {stage.served_by(host, "/") for _ in range(20)}, 15, what="the canary served")
    answered = [stage.served_by(host, "/") for _ in range(200)]
    assert set(answered) == {"PRODUCTION", "CANARY"}
    assert 60 <= answered.count("CANARY") <= 140  # 50% of 200; outside this band has odds below 1e-8


def test_chashsubset(stage):
    """chashsubset: upstream-hash-by $arg_predictorid with subsets of 3: one id stays within one subset."""
    host = "chashsubset.example.com"
    ips = [stage.echo.ips.get(f"HASH{n}") or stage.echo.start(f"HASH{n}") for n in range(6)]
    stage.cluster.apply(k8s.service("nginxhello"), k8s.endpoint_slice("nginxhello", ips, stage.echo.port))
    stage.cluster.apply(k8s.ingress("nginxhello-ingress", [k8s.rule(host, ("/", "Prefix", "nginxhello", 80))],
                                    annotations=annotations(upstream_hash_by="$arg_predictorid",
                                                            upstream_hash_by_subset="true",
                                                            upstream_hash_by_subset_size="3")))
    wait_for(lambda: stage.controller.get("/", host).status_code == 200, 15, what="the hashed host served")
    for predictor in ("a", "b", "c"):
        answered = {stage.served_by(host, f"/?predictorid={predictor}") for _ in range(30)}
        assert 1 <= len(answered) <= 3, (predictor, answered)
    every = {stage.served_by(host, f"/?predictorid=p{n}") for n in range(60)}
    assert len(every) > 3  # the subsets together cover more than one subset's endpoints


def test_configuration_snippet(stage):
    """customization/configuration-snippets: `more_set_headers` with $req_id answers the request's id."""
    host = "custom.configuration.example.com"
    serve(stage, "nginx-configuration-snippet", host,
          configuration_snippet='more_set_headers "Request-Id: $req_id";\n')
    wait_for(lambda: "request-id" in stage.controller.get("/", host).headers, 15, what="the snippet applied")
    answer = stage.controller.get("/", host)
    assert re.fullmatch(r"[0-9a-f]{32}", answer.headers["request-id"])
    assert answer.headers["request-id"] == answer.json()["headers"]["x-request-id"]


def test_custom_errors_with_a_custom_default_backend(stage):
    """customization/custom-errors (custom-default-backend): the Ingress's own default backend answers the
    statuses in custom-http-errors, told what happened by ingress-nginx's X-* headers."""
    host = "custom-errors.example.com"
    stage.cluster.apply(*stage.backend("ERRORS", service="nginx-errors"))
    serve(stage, "errors-app", host, default_backend="nginx-errors", custom_http_errors="404,503")
    wait_for(lambda: stage.controller.get("/missing?status=404", host).json()["backend"] == "ERRORS", 15,
             what="the error backend asked")
    answer = stage.controller.get("/missing?status=404", host)
    # It is asked on / with the query kept; the client gets its status (here the echo's, from that query) and body.
    assert answer.status_code == 404
    seen = answer.json()["headers"]
    assert {key: seen.get(key) for key in ("x-code", "x-original-uri", "x-namespace", "x-ingress-name",
                                           "x-service-name", "x-service-port")} == {
        "x-code": "404", "x-original-uri": "/missing?status=404", "x-namespace": "default",
        "x-ingress-name": "errors-app", "x-service-name": "errors-app-svc", "x-service-port": "80"}
    assert stage.served_by(host, "/fine") == "ERRORS-APP"


def test_custom_headers(stage):
    """customization/custom-headers: the ConfigMap named by proxy-set-headers goes to every backend (with nginx
    variables evaluated, as the guide's X-Request-Start shows), the one named by add-headers to every client."""
    serve(stage, "custom-headers", "custom-headers.example.com")
    stage.expect("custom-headers.example.com", "/", "CUSTOM-HEADERS")
    answer = stage.controller.get("/", "custom-headers.example.com")
    seen = answer.json()["headers"]
    assert seen["x-different-name"] == "true" and seen["x-using-nginx-controller"] == "true"
    assert re.fullmatch(r"t=\d{10}\.\d{3}", seen["x-request-start"])
    assert answer.headers["x-different-name"] == "true" and answer.headers["x-using-nginx-controller"] == "true"


def test_external_auth_headers(stage, services):
    """customization/external-auth-headers: the auth service's UserID and UserRole reach the backend of the
    secure Ingress; the public one needs no auth."""
    serve(stage, "public-demo-echo-service", "public-demo-echo-service.kube.local", backend="DEMO-ECHO")
    serve(stage, "secure-demo-echo-service", "secure-demo-echo-service.kube.local", backend="DEMO-ECHO",
          auth_url=f"http://127.0.0.1:{services}/auth", auth_response_headers="UserID, UserRole")
    public, secure = "public-demo-echo-service.kube.local", "secure-demo-echo-service.kube.local"
    wait_for(lambda: stage.controller.get("/", secure).status_code == 403, 15, what="the secure host asks")
    assert "userid" not in stage.controller.get("/", public).json()["headers"]
    assert "userid" not in stage.controller.get("/", public, headers={"User": "internal"}).json()["headers"]
    seen = stage.controller.get("/", secure, headers={"User": "internal"}).json()["headers"]
    assert (seen["userid"], seen["userrole"]) == ("42", "admin")
    assert "other" not in seen


def test_jwt_sized_response_headers(stage, services):
    """customization/jwt: with proxy-buffer-size 16k a backend's JWT-sized header is passed, not a 502."""
    host = "jwt.example.com"
    stage.cluster.apply(k8s.service("jwt-svc", port=services),
                        k8s.endpoint_slice("jwt-svc", ["127.0.0.1"], services))
    stage.cluster.apply(k8s.ingress("jwt", [k8s.rule(host, ("/jwt", "Prefix", "jwt-svc", services))]))
    wait_for(lambda: stage.controller.get("/jwt", host).status_code == 200, 15, what="the JWT backend served")
    assert stage.controller.get("/jwt", host).headers["authorization"] == f"Bearer {JWT}"


def test_ssl_dh_param(stage, tmp_path_factory):
    """customization/ssl-dh-param: the ConfigMap's DH parameters are those a DHE handshake uses."""
    host = "dhparam.example.com"
    directory = tmp_path_factory.mktemp("rsa")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(directory / "k.pem"),
                    "-out", str(directory / "c.pem"), "-days", "2", "-subj", f"/CN={host}"],
                   check=True, capture_output=True)
    stage.cluster.apply(k8s.secret("dh-tls", {"tls.crt": (directory / "c.pem").read_text(),
                                              "tls.key": (directory / "k.pem").read_text()}, "kubernetes.io/tls"))
    serve(stage, "dhparam", host, tls=[{"hosts": [host], "secretName": "dh-tls"}])

    def handshake() -> str:
        return subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{stage.controller.https_port}",
                               "-servername", host, "-tls1_2", "-cipher", "DHE-RSA-AES128-GCM-SHA256"],
                              input=b"", capture_output=True, timeout=20).stdout.decode(errors="replace")
    wait_for(lambda: f"CN = {host}" in handshake(), 15, what="the RSA certificate served")
    out = handshake()
    assert "Cipher is DHE-RSA-AES128-GCM-SHA256" in out
    assert "Server Temp Key: DH, 2048 bits" in out


def test_docker_registry(stage, pki):
    """docker-registry: proxy-body-size 0 lets an image layer of any size through; other hosts keep 1m."""
    host, limited = "registry.example.com", "limited.example.com"
    stage.cluster.apply(tls_secret("registry-tls", pki.issue(host)))
    serve(stage, "docker-registry", host, tls=[{"hosts": [host], "secretName": "registry-tls"}],
          proxy_body_size="0")
    serve(stage, "limited", limited)
    layer = b"\0" * (3 * 1024 * 1024)
    wait_for(lambda: https_get(stage.controller.https_port, host, "/v2/").status == 200, 15, what="the registry")
    pushed = https_get(stage.controller.https_port, host, "/v2/blobs/uploads/", method="PUT", body=layer)
    assert pushed.status == 200 and json.loads(pushed.body)["body_bytes"] == len(layer)
    stage.expect(limited, "/", "LIMITED")
    assert stage.controller.request("PUT", "/", limited, data=layer).status_code == 413


@pytest.fixture(scope="module")
def grpc_backend(tmp_path_factory) -> Iterator[int]:
    with h2c_backend(tmp_path_factory.mktemp("h2c")) as port:
        yield port


def test_grpc(stage, pki, grpc_backend):
    """grpc: backend-protocol GRPC with TLS at the ingress: the call reaches the backend over HTTP/2."""
    host = "grpctest.dev.mydomain.com"
    stage.cluster.apply(tls_secret("grpc-tls", pki.issue(host)), k8s.service("go-grpc-greeter-server", port=50051),
                        k8s.endpoint_slice("go-grpc-greeter-server", ["127.0.0.1"], grpc_backend))
    stage.cluster.apply(k8s.ingress("fortune-ingress", [k8s.rule(host, ("/", "Prefix", "go-grpc-greeter-server",
                                                                        50051))],
                                    tls=[{"hosts": [host], "secretName": "grpc-tls"}],
                                    annotations=annotations(backend_protocol="GRPC")))

    def call() -> str:
        return subprocess.run(["curl", "-sk", "--http2", "--resolve", f"{host}:{stage.controller.https_port}:127.0.0.1",
                               "-H", "Content-Type: application/grpc", "-H", "TE: trailers", "--data-binary", "",
                               f"https://{host}:{stage.controller.https_port}/helloworld.Greeter/SayHello"],
                              capture_output=True, text=True, timeout=10).stdout
    wait_for(lambda: call().startswith("protocol="), 15, what="the gRPC call answered")
    seen = answer_fields(call())
    assert (seen["protocol"], seen["path"], seen["content-type"]) == (
        "HTTP/2.0", "/helloworld.Greeter/SayHello", "application/grpc")


def test_multi_tls(stage, pki):
    """multi-tls: one Ingress, two hosts with a certificate each: each SNI gets its own, and its own Service."""
    stage.cluster.apply(tls_secret("foobar", pki.issue("foo.multi.example.com")),
                        tls_secret("barbaz", pki.issue("bar.multi.example.com")),
                        *stage.backend("HTTP-SVC", service="http-svc"), *stage.backend("NGINX", service="nginx"))
    stage.cluster.apply(k8s.ingress("foo-tls", [k8s.rule("foo.multi.example.com", ("/", "Prefix", "http-svc", 80)),
                                                k8s.rule("bar.multi.example.com", ("/", "Prefix", "nginx", 80))],
                                    tls=[{"hosts": ["foo.multi.example.com"], "secretName": "foobar"},
                                         {"hosts": ["bar.multi.example.com"], "secretName": "barbaz"}]))
    port = stage.controller.https_port
    for host, backend in (("foo.multi.example.com", "HTTP-SVC"), ("bar.multi.example.com", "NGINX")):
        wait_for(lambda: served_certificate(port, host, [pki.cert_path]).get("commonName") == host, 15,
                 what=f"{host}'s certificate")
        # The certificates table is pushed before the routes: the host may answer 404 a moment longer.
        wait_for(lambda: https_get(port, host, trusted=[pki.cert_path]).status == 200, 15, what=f"{host} served")
        assert json.loads(https_get(port, host, trusted=[pki.cert_path]).body)["backend"] == backend


def test_rewrite(stage):
    """rewrite: rewrite-target /$2 with the guide's capture groups, and app-root."""
    host = "rewrite.bar.com"
    stage.cluster.apply(*stage.backend("REWRITE", service="rewrite-svc"))
    stage.cluster.apply(k8s.ingress("rewrite", [k8s.rule(host, ("/something(/|$)(.*)", "ImplementationSpecific",
                                                                "rewrite-svc", 80))],
                                    annotations=annotations(use_regex="true", rewrite_target="/$2")))
    stage.expect(host, "/something", "REWRITE")
    for asked, received in (("/something", "/"), ("/something/", "/"), ("/something/new", "/new")):
        assert stage.controller.get(asked, host).json()["path"] == received, asked
    serve(stage, "approot", "approot.bar.com", app_root="/app1")
    wait_for(lambda: stage.controller.get("/", "approot.bar.com").status_code == 302, 15, what="app-root")
    assert stage.controller.get("/", "approot.bar.com").headers["location"] == "http://approot.bar.com/app1"


def test_tls_termination(stage, pki):
    """tls-termination: HTTPS with the Secret's certificate; plain HTTP is redirected there (308)."""
    host = "tls-termination.example.com"
    stage.cluster.apply(tls_secret("termination-tls", pki.issue(host)))
    serve(stage, "nginx-test-tls", host, tls=[{"hosts": [host], "secretName": "termination-tls"}])
    port = stage.controller.https_port
    wait_for(lambda: served_certificate(port, host, [pki.cert_path]).get("commonName") == host, 15,
             what="the termination certificate")
    assert json.loads(https_get(port, host, "/x", trusted=[pki.cert_path]).body)["backend"] == "NGINX-TEST-TLS"
    redirect = stage.controller.get("/x?y=1", host)
    assert (redirect.status_code, redirect.headers["location"]) == (308, f"https://{host}/x?y=1")


def test_custom_configuration_proxy_read_timeout(stage):
    """customization/custom-configuration: the ConfigMap's proxy timeouts apply to every Ingress. The guide sets
    120 s; 1 s here, so that a backend pausing 2 s between two writes is cut off. Last: it changes the ConfigMap."""
    host = "timeouts.example.com"
    serve(stage, "timeouts", host)
    stage.expect(host, "/", "TIMEOUTS")
    assert stage.controller.get("/?pause=2", host).json()["backend"] == "TIMEOUTS"  # the default: 60 s
    stage.cluster.apply(k8s.config_map(CONFIGMAP, {**GUIDE_CONFIG, "proxy-connect-timeout": "10",
                                                   "proxy-read-timeout": "1", "proxy-send-timeout": "120"}))

    def cut_off() -> bool:
        try:
            stage.controller.get("/?pause=2", host).json()
        except (requests.exceptions.ChunkedEncodingError, requests.exceptions.ConnectionError, ValueError):
            return True
        return False
    wait_for(cut_off, 20, what="the 1 s read timeout applied")
    assert stage.served_by(host, "/") == "TIMEOUTS"

