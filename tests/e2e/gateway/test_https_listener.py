"""An HTTPS listener: its certificate served by SNI for the hosts of its routes, a route of the HTTPS listener only
over TLS, and a certificate in another namespace only with a ReferenceGrant."""
from __future__ import annotations

from tests.e2e.tls.pki import TestCA, https_get, served_certificate, tls_secret
from tests.support import gateway_objects as gw
from tests.support.net import wait_for

HOST = "secure.example.com"


def test_https_listener_serves_its_certificate_and_its_routes_only_over_tls(stage, tmp_path):
    ca = TestCA(tmp_path)
    stage.cluster.apply(tls_secret("secure-tls", ca.issue(HOST), namespace="certs"),
                        *stage.backend("GW-TLS"), *stage.backend("GW-PLAIN"))
    stage.cluster.apply(gw.gateway("secure", listeners=[
        gw.listener("http", hostname=HOST),
        gw.listener("https", port=443, protocol="HTTPS", hostname=HOST, certificate="secure-tls",
                    certificate_namespace="certs")]))
    stage.cluster.apply(
        gw.http_route("tls-only", parents=[{"name": "secure", "sectionName": "https"}],
                      rules=[gw.rule(gw.backend_ref("gw-tls"), matches=[gw.path_match("/admin")])]),
        gw.http_route("both", parents=[{"name": "secure"}], rules=[gw.rule(gw.backend_ref("gw-plain"))]))
    stage.expect_answer(HOST, "/admin", "GW-PLAIN")  # plain HTTP: the HTTPS listener's route does not apply
    wait_for(lambda: any("certs/secure-tls is in another namespace" in p for p in stage.controller.problems()), 10,
             what="the refused certificate reference")
    stage.cluster.apply(gw.reference_grant("gateways", ns="certs", from_namespace="default", from_kind="Gateway",
                                           to_kind="Secret"))
    port = stage.controller.https_port
    wait_for(lambda: served_certificate(port, HOST, [ca.cert_path]).get("commonName") == HOST, 15,
             what="the listener's certificate by SNI")
    wait_for(lambda: https_get(port, HOST, "/admin", [ca.cert_path]).body.startswith(b"{"), 10, what="TLS route")
    assert b'"GW-TLS"' in https_get(port, HOST, "/admin", [ca.cert_path]).body
    assert b'"GW-PLAIN"' in https_get(port, HOST, "/", [ca.cert_path]).body
    assert stage.answer(HOST, "/admin")["backend"] == "GW-PLAIN"
