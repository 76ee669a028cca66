"""BackendTLSPolicies as the model applies them (which policy a backend gets, a rule's backends verified one way) and
the CA references both sides of TLS share (ca_bundles.py). Traffic and status through nginx:
tests/e2e/gateway/test_gateway_tls_validation.py."""
from __future__ import annotations

from services.syncer.model.gateway.ca_bundles import ca_bundle
from services.syncer.model.gateway.objects import GatewayObjects
from services.syncer.model.gateway.reference_grants import ReferenceGrants
from services.syncer.model.gateway.tls_status import policy_statuses
from services.syncer.model.types import Model
from tests.unit.syncer.gateway.conftest import _pems

CA = _pems("ca.example")[0].decode()


def tls_service(gw, name: str) -> None:
    gw.service(name, ports=(("btls", 443),))
    gw.endpoint_slice(name, port_name="btls", port=8443)


def policy(gw, name: str, service: str, *, section: str | None = None, hostname: str = "backend.example",
           created: int = 0, ca: str = "ca") -> dict:
    target = {"group": "", "kind": "Service", "name": service, **({"sectionName": section} if section else {})}
    return gw.add({"apiVersion": f"{gw.objects.GROUP}/v1", "kind": "BackendTLSPolicy",
                   "metadata": {"name": name, "namespace": "default", "creationTimestamp": gw.timestamp(created)},
                   "spec": {"targetRefs": [target], "validation": {
                       "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": ca}], "hostname": hostname}}})


def verified_name(gw, model: Model) -> str | None:
    """The name the profile of the host's rule verifies its backends for (None: not verified)."""
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    [profile] = [p for p in model.config.profiles if p.name == action["profile"]]
    return profile.backend_tls.name if profile.backend_tls else None


def test_a_policy_naming_the_port_comes_first_then_the_oldest(gw):
    o = gw.objects
    gw.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": "default"},
            "data": {"ca.crt": CA}})
    tls_service(gw, "tls")
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("r", rules=[o.rule(o.backend_ref("tls", 443))])
    policy(gw, "whole-service", "tls", hostname="old.example", created=1)
    policy(gw, "younger", "tls", hostname="young.example", created=2)
    assert verified_name(gw, gw.build()) == "old.example"
    policy(gw, "by-port", "tls", section="btls", hostname="port.example", created=3)
    assert verified_name(gw, gw.build()) == "port.example"
    statuses = policy_statuses(GatewayObjects.of(gw.store), ours=frozenset({"default/gw"}))
    accepted = {name: conditions[0][1:3] for (_, name), (_, conditions) in statuses.items()}
    assert accepted == {"by-port": (True, "Accepted"), "whole-service": (True, "Accepted"),
                        "younger": (False, "Conflicted")}


def test_a_rule_verifies_its_backends_one_way(gw):
    o = gw.objects
    gw.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": "default"},
            "data": {"ca.crt": CA}})
    tls_service(gw, "tls")
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("r", rules=[o.rule(o.backend_ref("tls", 443), o.backend_ref("web"))])
    policy(gw, "p", "tls")
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    assert [b["backend"] for b in action["backends"]] == ["default-tls-443", None]
    assert any("differs from the rule's other backends'" in w for w in gw.warnings(model))


def test_a_policy_whose_ca_does_not_resolve_answers_500(gw):
    o = gw.objects
    tls_service(gw, "tls")
    gw.gateway(o.listener(hostname="app.example.com"))
    gw.route("r", rules=[o.rule(o.backend_ref("tls", 443))])
    policy(gw, "p", "tls", ca="missing")
    [action] = gw.gateway_of(gw.build(), "app.example.com")["actions"]
    assert action["backends"][0]["backend"] is None


def test_ca_references_say_what_is_wrong_with_the_spec_reason():
    config_maps = {("default", "ca"): {"data": {"ca.crt": CA}}, ("default", "empty"): {"data": {}},
                   ("default", "junk"): {"data": {"ca.crt": "not a certificate"}}, ("other", "ca"): {"data": {"ca.crt": CA}}}

    def reasons(*refs: dict) -> list[str]:
        bundle = ca_bundle(list(refs), namespace="default", where="x", config_maps=config_maps,
                           source=("gateway.networking.k8s.io", "Gateway"), grants=ReferenceGrants(()))
        return [str(problem.reason) for problem in bundle.problems]
    assert reasons({"kind": "ConfigMap", "name": "ca"}) == []
    assert reasons({"kind": "ConfigMap", "name": "missing"}, {"kind": "ConfigMap", "name": "empty"},
                   {"kind": "ConfigMap", "name": "junk"}) == ["InvalidCACertificateRef"] * 3
    assert reasons({"kind": "Secret", "name": "ca"}) == ["InvalidCACertificateKind"]
    assert reasons({"kind": "ConfigMap", "name": "ca", "namespace": "other"}) == ["RefNotPermitted"]
    local = ca_bundle([{"kind": "ConfigMap", "name": "ca", "namespace": "other"}], namespace="default", where="x",
                      config_maps=config_maps)  # a BackendTLSPolicy's references: no namespace, whatever the grants
    assert [str(p.reason) for p in local.problems] == ["RefNotPermitted"] and local.pem is None
