"""A TLSRoute behind a Terminate listener whose backend's Service has a BackendTLSPolicy: the passthrough table
carries the policy's CA certificates (PEM, never a file name) and host name for that backend, as the HTTPRoute side
applies policies; a refused policy closes the backend's share; a Passthrough listener ignores policies. Through the
proxy: tests/e2e/gateway/test_tls_terminate_and_weights.py."""
from __future__ import annotations

from tests.unit.syncer.gateway.conftest import _pems
from tests.unit.syncer.gateway.test_tls_policies import policy, tls_service

PASSTHROUGH = {"enable_ssl_passthrough": True}
CA = _pems("ca.example")[0].decode()


def stage(gw) -> None:
    o = gw.objects
    tls_service(gw, "tls")
    gw.certificate("term-cert", host="t.example.com")
    gw.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": "default"},
            "data": {"ca.crt": CA}})
    gw.gateway(o.listener("term", port=443, protocol="TLS", hostname="t.example.com", certificate="term-cert"),
               o.listener("pt", hostname="p.example.com", passthrough=True))
    for name, host in (("term", "t.example.com"), ("pt", "p.example.com")):
        gw.add(o.tls_route(name, o.backend_ref("tls", 443), o.backend_ref("web", 80), created=gw.timestamp(),
                           hostnames=[host]))


def test_a_terminated_backend_gets_its_policys_ca_and_name_and_a_passthrough_one_nothing(gw):
    stage(gw)
    policy(gw, "p", "tls", section="btls", hostname="backend.example")
    model = gw.build(**PASSTHROUGH)
    verified, plain = model.passthrough["t.example.com"]["backends"]
    assert verified["tls"] == {"ca": CA if CA.endswith("\n") else CA + "\n", "name": "backend.example"}
    assert "tls" not in plain
    assert all("tls" not in backend for backend in model.passthrough["p.example.com"]["backends"])
    assert not gw.rejections(model)


def test_a_refused_policy_closes_the_terminated_backends_share(gw):
    stage(gw)
    policy(gw, "p", "tls", ca="missing")
    model = gw.build(**PASSTHROUGH)
    refused, plain = model.passthrough["t.example.com"]["backends"]
    assert refused == {"weight": 1, "endpoints": []} and plain["endpoints"]
    assert any("BackendTLSPolicy default/p is not accepted" in p and "terminated connections is closed" in p
               for p in gw.warnings(model))
    assert model.passthrough["p.example.com"]["backends"][0]["endpoints"]  # passed through: the client's own TLS
