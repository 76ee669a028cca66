"""TLS termination: certificates chosen by SNI and rotated without a reload, HTTPS redirects, HSTS."""
from __future__ import annotations

import subprocess

import pytest

from services.nginxconf.prefix import FAKE_CERTIFICATE_CN
from services.syncer.model.types import HostRoutes

from .conftest import route, trust

FAKE = FAKE_CERTIFICATE_CN


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    trust(shared_nginx.paths.default_certificate)
    return shared_nginx


@pytest.fixture(scope="module")
def app(echo):
    return echo("app")


@pytest.fixture(scope="module")
def certs(make_certificate):
    return {name: make_certificate(name) for name in ("a.tls.test", "*.wild.tls.test", "default.tls.test")}


def test_the_certificate_is_chosen_by_sni_exact_then_wildcard_then_default(nginx, app, certs):
    nginx.push({"_": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]},
               {"certs": {"a": certs["a.tls.test"], "wild": certs["*.wild.tls.test"],
                          "default": certs["default.tls.test"]},
                "hosts": {"a.tls.test": "a", "*.wild.tls.test": "wild"}, "default": "default"})

    served = {sni: nginx.get("/", https=True, sni=sni).peer_subject
              for sni in ("a.tls.test", "A.TLS.test", "x.wild.tls.test", "x.y.wild.tls.test", "other.test", None)}

    assert served == {"a.tls.test": "a.tls.test", "A.TLS.test": "a.tls.test", "x.wild.tls.test": "*.wild.tls.test",
                      "x.y.wild.tls.test": "default.tls.test", "other.test": "default.tls.test",
                      None: "default.tls.test"}
    response = nginx.get("/", https=True, sni="a.tls.test")
    assert response.backend == "app"
    assert response.json["headers"]["x-forwarded-proto"] == "https"
    assert response.json["headers"]["x-forwarded-port"] == str(nginx.https_port)


def test_without_a_default_the_fake_certificate_is_served(nginx, app, certs):
    nginx.push({"_": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]},
               {"certs": {"a": certs["a.tls.test"]}, "hosts": {"a.tls.test": "a"}, "default": None})

    assert nginx.get("/", https=True, sni="a.tls.test").peer_subject == "a.tls.test"
    assert nginx.get("/", https=True, sni="other.test").peer_subject == FAKE


def test_certificates_rotate_without_a_reload(nginx, app, make_certificate):
    first, second = make_certificate("rotate.tls.test"), make_certificate("rotated.tls.test")
    workers = nginx.worker_pids()
    nginx.push({"_": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]},
               {"certs": {"r": first}, "hosts": {"rotate.tls.test": "r"}})
    assert nginx.get("/", https=True, sni="rotate.tls.test").peer_subject == "rotate.tls.test"

    nginx.push({"_": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]},
               {"certs": {"r": second}, "hosts": {"rotate.tls.test": "r"}})

    assert nginx.get("/", https=True, sni="rotate.tls.test").peer_subject == "rotated.tls.test"
    assert nginx.worker_pids() == workers


def test_plain_http_to_a_tls_host_is_redirected_with_308(nginx, app):
    nginx.push({"secure.test": HostRoutes(prefix={"/": route("app")}, tls=True),
                "optional.test": HostRoutes(prefix={"/": route("app")}, tls=True, ssl_redirect=False),
                "forced.test": HostRoutes(prefix={"/": route("app")}, force_ssl_redirect=True),
                "plain.test": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]})

    redirect = nginx.get("/a/b?c=d", host="secure.test")
    assert redirect.status == 308
    # As ingress-nginx: no port (use-port-in-redirects names it), whatever the HTTPS port.
    assert redirect.headers["location"] == "https://secure.test/a/b?c=d"
    assert nginx.get("/", host="forced.test").status == 308
    assert nginx.get("/", host="optional.test").backend == "app"
    assert nginx.get("/", host="plain.test").backend == "app"
    # cert-manager's HTTP-01 challenges must reach the backend over plain HTTP.
    assert nginx.get("/.well-known/acme-challenge/token", host="secure.test").backend == "app"
    assert nginx.get("/", host="secure.test", https=True, sni="secure.test").backend == "app"


def test_hsts_is_sent_on_https_only(nginx, app):
    hsts = "max-age=31536000; includeSubDomains"
    nginx.push({"hsts.test": HostRoutes(prefix={"/": route("app")}, tls=True, hsts=hsts),
                "nohsts.test": HostRoutes(prefix={"/": route("app")}, tls=True)}, {"app": [app.endpoint]})

    assert nginx.get("/", host="hsts.test", https=True, sni="hsts.test").headers["strict-transport-security"] == hsts
    assert "strict-transport-security" not in nginx.get("/", host="nohsts.test", https=True).headers
    plain = nginx.get("/.well-known/acme-challenge/x", host="hsts.test")
    assert plain.backend == "app" and "strict-transport-security" not in plain.headers
    # Over HTTP/2, where each stream's request has a connection of its own that shares the TLS one.
    head = subprocess.run(["curl", "-sk", "--http2", "-o", "/dev/null", "-D", "-", "--resolve",
                           f"hsts.test:{nginx.https_port}:127.0.0.1", f"https://hsts.test:{nginx.https_port}/"],
                          capture_output=True, text=True, timeout=30, check=True).stdout
    assert head.startswith("HTTP/2 200") and f"strict-transport-security: {hsts}\n" in head, head
