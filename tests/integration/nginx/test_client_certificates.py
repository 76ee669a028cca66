"""Client certificates (auth-tls-*) through real nginx and real TLS clients: the handshake asks for a
certificate by SNI, and the router verifies it per route against that route's Ingress's CA and CRL."""
from __future__ import annotations

import http.client
import json
import socket

import pytest

from services.syncer.model.types import ClientAuth, HostRoutes
from tests.support.client_pki import Pki

from .conftest import client_tls_context, route

PROTECTED, OTHER, ATTACKER = "mtls.example", "open.example", "attacker.example"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def nginx(shared_nginx, make_certificate, echo):
    shared_nginx.app = echo("app")
    shared_nginx.certificates = {"certs": {h: make_certificate(h) for h in (PROTECTED, OTHER, ATTACKER)},
                                 "hosts": {h: h for h in (PROTECTED, OTHER, ATTACKER)}, "default": None}
    return shared_nginx


def auth(pki: Pki, ca: str = "a", **options) -> ClientAuth:
    """CA A's check (with A's CRL) or CA B's, "on" unless `options` say otherwise."""
    values = dict(crl=pki.text("ca-a.crl") if ca == "a" else None, verify="on", depth=1, error_page=None,
                  pass_certificate=False, match_cn=None)
    values.update(options)
    return ClientAuth(ca=pki.text(f"ca-{ca}.crt"), **values)


def serve(nginx, pki: Pki, protected: ClientAuth, attacker: ClientAuth | None = None) -> None:
    """PROTECTED with `protected`; ATTACKER (another tenant, its own CA B) with `attacker`; OTHER without."""
    routes = {PROTECTED: HostRoutes(prefix={"/": route("app")}, client_auth={"default/test": protected}),
              OTHER: HostRoutes(prefix={"/": route("app")})}
    if attacker:
        routes[ATTACKER] = HostRoutes(prefix={"/": route("app")}, client_auth={"default/test": attacker})
    nginx.push(routes, {"app": [nginx.app.endpoint]}, nginx.certificates)


def request(nginx, pki: Pki, *, client: str | None, sni: str = PROTECTED, host: str | None = None,
            https: bool = True, headers: dict[str, str] | None = None) -> tuple[int, dict, dict]:
    """(status, response headers, the headers the backend received) for GET / with `client`'s certificate."""
    sock = socket.create_connection(("127.0.0.1", nginx.https_port if https else nginx.http_port), timeout=10)
    if https:
        context = client_tls_context()
        if client:
            context.load_cert_chain(pki.dir / f"{client}.crt", pki.dir / f"{client}.key")
        sock = context.wrap_socket(sock, server_hostname=sni)
    conn = http.client.HTTPConnection("127.0.0.1", timeout=10)
    conn.sock = sock
    try:
        conn.request("GET", "/", headers={"Host": host or sni, **(headers or {})})
        response = conn.getresponse()
        body = response.read()
        seen = json.loads(body)["headers"] if response.getheader("content-type") == "application/json" else {}
        return response.status, {k.lower(): v for k, v in response.getheaders()}, seen
    finally:
        conn.close()


def test_a_certificate_from_the_ingress_ca_passes_with_its_details_for_the_backend(nginx, pki):
    serve(nginx, pki, auth(pki, pass_certificate=True))
    status, _, seen = request(nginx, pki, client="good")
    assert status == 200
    assert seen["ssl-client-verify"] == "SUCCESS"
    assert seen["ssl-client-subject-dn"] == "CN=client-good" and seen["ssl-client-issuer-dn"] == "CN=CA A"
    assert seen["ssl-client-cert"].startswith("-----BEGIN%20CERTIFICATE-----")


@pytest.mark.parametrize("client", [None, "intruder", "revoked"])
def test_verify_on_refuses_no_certificate_another_ca_and_a_revoked_one(nginx, pki, client):
    serve(nginx, pki, auth(pki))
    assert request(nginx, pki, client=client)[0] == 400


def test_optional_takes_no_certificate_and_refuses_a_bad_one(nginx, pki):
    serve(nginx, pki, auth(pki, verify="optional"))
    status, _, seen = request(nginx, pki, client=None, headers={"ssl-client-verify": "SUCCESS"})
    assert status == 200 and seen["ssl-client-verify"] == "NONE"  # a client cannot send its own verdict
    assert request(nginx, pki, client="intruder")[0] == 400
    assert request(nginx, pki, client="good")[0] == 200


def test_optional_no_ca_passes_and_tells_the_backend_the_verdict(nginx, pki):
    serve(nginx, pki, auth(pki, verify="optional_no_ca"))
    status, _, seen = request(nginx, pki, client="intruder")
    assert status == 200 and seen["ssl-client-verify"].startswith("FAILED:")
    assert seen["ssl-client-subject-dn"] == "CN=client-good" and seen["ssl-client-issuer-dn"] == "CN=CA B"


def test_a_refused_certificate_is_redirected_to_the_error_page(nginx, pki):
    serve(nginx, pki, auth(pki, error_page="https://login.example/denied"))
    status, headers, _ = request(nginx, pki, client="intruder")
    assert (status, headers["location"]) == (302, "https://login.example/denied")


def test_match_cn_refuses_other_subjects_with_403(nginx, pki):
    serve(nginx, pki, auth(pki, match_cn="CN=client-(good|other)$"))
    assert request(nginx, pki, client="good")[0] == 200
    serve(nginx, pki, auth(pki, match_cn="CN=client-other"))
    assert request(nginx, pki, client="good")[0] == 403


def test_a_certificate_another_host_accepted_never_opens_the_protected_host(nginx, pki):
    # The attacker's own Ingress trusts CA B. A handshake for its host with a CA B certificate, then a request
    # for the protected host on the same connection: the certificate is checked against CA A, and refused.
    serve(nginx, pki, auth(pki), attacker=auth(pki, ca="b"))
    assert request(nginx, pki, client="intruder", sni=ATTACKER)[0] == 200
    assert request(nginx, pki, client="intruder", sni=ATTACKER, host=PROTECTED)[0] == 400
    # The certificate counts whatever the SNI, when it is from CA A; a host without client authentication
    # asks for none, so its handshake never carries one.
    assert request(nginx, pki, client="good", sni=ATTACKER, host=PROTECTED)[0] == 200
    assert request(nginx, pki, client="good", sni=OTHER, host=PROTECTED)[0] == 400


def test_plain_http_has_no_certificate_and_hosts_without_client_auth_are_untouched(nginx, pki):
    serve(nginx, pki, auth(pki))
    assert request(nginx, pki, client=None, https=False)[0] == 400
    status, _, seen = request(nginx, pki, client=None, sni=OTHER, headers={"ssl-client-verify": "SUCCESS"})
    assert status == 200 and "ssl-client-verify" not in seen
