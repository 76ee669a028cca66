"""The Gateway API status pyngress computes (model/gateway/status.py): each condition's reason, as the Gateway API
conformance cases assert them, and observedGeneration on every condition."""
from typing import Any

import pytest

from services.syncer.model.gateway.status import GatewayStatuses, store_statuses
from tests.support.gateway_status import conditions

HTTP_ROUTE = {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}
GRPC_ROUTE = {"group": "gateway.networking.k8s.io", "kind": "GRPCRoute"}


def statuses(gw, **addresses: Any) -> GatewayStatuses:
    return store_statuses(gw.store, settings=gw.settings, addresses=addresses.get("addresses", ()))


def listener_of(found: GatewayStatuses, name: str, gateway: tuple[str, str] = ("default", "gw")) -> dict[str, Any]:
    [listener] = [item for item in found.gateways[gateway]["listeners"] if item["name"] == name]
    return listener


def parent_of(found: GatewayStatuses, route: str, *, kind: str = "HTTPRoute", ns: str = "default") -> dict[str, Any]:
    [entry] = found.routes[kind, ns, route]
    return entry


def generation(obj: dict[str, Any], value: int) -> dict[str, Any]:
    obj["metadata"]["generation"] = value
    return obj


def test_our_gateway_class_is_accepted_and_another_controllers_is_left_alone(gw):
    generation(gw.store["GatewayClass//pyngress"], 3)
    gw.add(gw.objects.gateway_class("theirs", controller="example.com/other"))
    found = statuses(gw)
    assert list(found.classes) == ["pyngress"]
    [accepted] = found.classes["pyngress"]["conditions"]
    assert (accepted["type"], accepted["status"], accepted["reason"], accepted["observedGeneration"]) == (
        "Accepted", "True", "Accepted", 3)


def test_an_accepted_gateway_is_programmed_with_its_listeners_and_addresses(gw):
    o = gw.objects
    generation(gw.gateway(o.listener("http"), o.listener("other", hostname="other.example.com")), 2)
    gw.route("a", rules=[o.rule(o.backend_ref("web"))])
    gw.route("b", parents=[{"name": "gw", "sectionName": "http"}], rules=[o.rule(o.backend_ref("web"))])
    found = statuses(gw, addresses=[{"ip": "192.0.2.1"}, {"hostname": "lb.example.com"}])
    status = found.gateways["default", "gw"]
    assert conditions(status) == {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed")}
    assert status["addresses"] == [{"type": "IPAddress", "value": "192.0.2.1"},
                                   {"type": "Hostname", "value": "lb.example.com"}]
    http = listener_of(found, "http")
    assert http["supportedKinds"] == [HTTP_ROUTE, GRPC_ROUTE]
    assert conditions(http) == {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
                                "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("False", "NoConflicts")}
    assert (http["attachedRoutes"], listener_of(found, "other")["attachedRoutes"]) == (2, 1)
    assert {c["observedGeneration"] for c in [*status["conditions"], *http["conditions"]]} == {2}


@pytest.mark.parametrize("listener, reason, kinds", [
    ({"name": "http", "port": 10254, "protocol": "HTTP"}, "PortUnavailable", [HTTP_ROUTE, GRPC_ROUTE]),
    ({"name": "http", "port": 80, "protocol": "UDP"}, "UnsupportedProtocol", []),
])
def test_a_listener_on_a_port_or_protocol_not_served_is_not_accepted(gw, listener, reason, kinds):
    gw.gateway(listener)
    found = statuses(gw)
    status = listener_of(found, "http")
    assert conditions(status)["Accepted"] == ("False", reason)
    assert conditions(status)["Programmed"] == ("False", "Invalid")
    assert status["supportedKinds"] == kinds
    assert conditions(found.gateways["default", "gw"]) == {"Accepted": ("False", "ListenersNotValid"),
                                                           "Programmed": ("False", "Invalid")}


def test_a_gateway_with_one_listener_not_accepted_is_accepted_with_reason_listeners_not_valid(gw):
    o = gw.objects
    gw.gateway(o.listener("http"), {"name": "invalid", "port": 80, "protocol": "UDP"})
    found = statuses(gw)
    assert conditions(found.gateways["default", "gw"]) == {"Accepted": ("True", "ListenersNotValid"),
                                                           "Programmed": ("True", "Programmed")}
    assert conditions(listener_of(found, "http"))["Accepted"] == ("True", "Accepted")


@pytest.mark.parametrize("certificate, namespace, reason", [
    ("missing", None, "InvalidCertificateRef"),
    ("app-tls", "certs", "RefNotPermitted"),
])
def test_an_https_listener_whose_certificate_does_not_resolve(gw, certificate, namespace, reason):
    o = gw.objects
    gw.certificate("app-tls", ns="certs")
    gw.gateway(o.listener("https", port=443, protocol="HTTPS", certificate=certificate,
                          certificate_namespace=namespace))
    status = listener_of(statuses(gw), "https")
    assert conditions(status)["ResolvedRefs"] == ("False", reason)
    assert conditions(status)["Accepted"] == ("True", "Accepted")
    assert conditions(status)["Programmed"] == ("False", "Invalid")
    assert status["supportedKinds"] == [HTTP_ROUTE, GRPC_ROUTE]


def test_a_certificate_in_another_namespace_with_a_reference_grant_resolves(gw):
    o = gw.objects
    gw.certificate("app-tls", ns="certs")
    gw.add(o.reference_grant("certs", ns="certs", from_namespace="default", to_kind="Secret", from_kind="Gateway"))
    gw.gateway(o.listener("https", port=443, protocol="HTTPS", certificate="app-tls", certificate_namespace="certs"))
    assert conditions(listener_of(statuses(gw), "https"))["ResolvedRefs"] == ("True", "ResolvedRefs")


@pytest.mark.parametrize("kinds, supported, programmed", [
    ([{"kind": "InvalidRouteKind"}], [], "False"),
    ([{"kind": "InvalidRouteKind"}, {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}], [HTTP_ROUTE],
     "True"),
])
def test_a_listener_naming_route_kinds_not_served(gw, kinds, supported, programmed):
    o = gw.objects
    gw.gateway({**o.listener("http"), "allowedRoutes": {"kinds": kinds}})
    status = listener_of(statuses(gw), "http")
    assert conditions(status)["ResolvedRefs"] == ("False", "InvalidRouteKinds")
    assert conditions(status)["Programmed"][0] == programmed
    assert status["supportedKinds"] == supported


def test_an_attached_route_is_accepted_with_its_references_resolved(gw):
    o = gw.objects
    gw.gateway(o.listener("http"))
    generation(gw.route("web", parents=[{"name": "gw", "sectionName": "http"}], rules=[o.rule(o.backend_ref("web"))]),
               4)
    entry = parent_of(statuses(gw), "web")
    assert entry["controllerName"] == "pyngress.io/gateway-controller"
    assert entry["parentRef"] == {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw",
                                  "sectionName": "http"}
    assert conditions(entry) == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    assert {c["observedGeneration"] for c in entry["conditions"]} == {4}


@pytest.mark.parametrize("backend, reason", [
    ({"name": "missing", "port": 80}, "BackendNotFound"),
    ({"name": "web", "port": 80, "namespace": "other"}, "RefNotPermitted"),
    ({"name": "web", "port": 80, "group": "example.com", "kind": "Bucket"}, "InvalidKind"),
])
def test_a_route_whose_backend_does_not_resolve_is_accepted_with_resolved_refs_false(gw, backend, reason):
    o = gw.objects
    gw.app_service("web", ns="other")
    gw.gateway(o.listener("http"))
    gw.route("web", rules=[o.rule(o.backend_ref("web"), backend)])
    assert conditions(parent_of(statuses(gw), "web")) == {"Accepted": ("True", "Accepted"),
                                                          "ResolvedRefs": ("False", reason)}


def test_a_backend_in_another_namespace_with_a_reference_grant_resolves(gw):
    o = gw.objects
    gw.app_service("web", ns="other")
    gw.add(o.reference_grant("web", ns="other", from_namespace="default"))
    gw.gateway(o.listener("http"))
    gw.route("web", rules=[o.rule(o.backend_ref("web", ns="other"))])
    assert conditions(parent_of(statuses(gw), "web"))["ResolvedRefs"] == ("True", "ResolvedRefs")


@pytest.mark.parametrize("parent, listener, reason", [
    ({"name": "gw", "namespace": "infra", "sectionName": "missing"}, {"namespaces": {"from": "All"}},
     "NoMatchingParent"),
    ({"name": "gw", "namespace": "infra", "port": 8080}, {"namespaces": {"from": "All"}}, "NoMatchingParent"),
    ({"name": "gw", "namespace": "infra"}, {}, "NotAllowedByListeners"),
    ({"name": "gw", "namespace": "infra"}, {"hostname": "other.example.com", "namespaces": {"from": "All"}},
     "NoMatchingListenerHostname"),
    ({"name": "gw", "namespace": "infra"}, {"namespaces": {"from": "All"}, "kinds": ["GRPCRoute"]},
     "NotAllowedByListeners"),  # only the route's kind keeps it off
])
def test_a_route_attached_to_no_listener_of_our_gateway_is_not_accepted(gw, parent, listener, reason):
    o = gw.objects
    gw.gateway(o.listener("http", **listener), ns="infra")
    gw.route("web", hostnames=["app.example.com"], parents=[parent], rules=[o.rule(o.backend_ref("web"))])
    found = statuses(gw)
    assert conditions(parent_of(found, "web"))["Accepted"] == ("False", reason)
    assert listener_of(found, "http", ("infra", "gw"))["attachedRoutes"] == 0


def test_a_route_pyngress_cannot_serve_is_not_accepted_with_reason_unsupported_value(gw):
    o = gw.objects
    gw.gateway(o.listener("http"))
    gw.route("web", rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/a", kind="Bogus")])])
    assert conditions(parent_of(statuses(gw), "web"))["Accepted"] == ("False", "UnsupportedValue")


def test_only_parents_that_are_our_gateways_get_an_entry(gw):
    o = gw.objects
    gw.add(o.gateway_class("theirs", controller="example.com/other"))
    gw.add(o.gateway("other", class_name="theirs"))
    gw.gateway(o.listener("http"))
    gw.route("both", parents=[{"name": "other"}, {"name": "gw"}], rules=[o.rule(o.backend_ref("web"))])
    gw.route("theirs", parents=[{"name": "other"}], rules=[o.rule(o.backend_ref("web"))])
    found = statuses(gw)
    assert [entry["parentRef"]["name"] for entry in found.routes["HTTPRoute", "default", "both"]] == ["gw"]
    assert ("HTTPRoute", "default", "theirs") not in found.routes
    assert ("default", "other") not in found.gateways


def test_grpc_and_tls_routes_get_their_parent_entries(gw):
    o = gw.objects
    gw.settings = gw.settings.replace_flags(enable_ssl_passthrough=True)
    gw.gateway(o.listener("http"), o.listener("tls", hostname="tls.example.com", passthrough=True))
    gw.add(o.grpc_route("grpc", rules=[o.rule(o.backend_ref("web"))]))
    gw.add(o.tls_route("tls", o.backend_ref("missing", 443), parents=[{"name": "gw", "sectionName": "tls"}]))
    found = statuses(gw)
    assert conditions(parent_of(found, "grpc", kind="GRPCRoute")) == {"Accepted": ("True", "Accepted"),
                                                                       "ResolvedRefs": ("True", "ResolvedRefs")}
    assert conditions(parent_of(found, "tls", kind="TLSRoute")) == {"Accepted": ("True", "Accepted"),
                                                                     "ResolvedRefs": ("False", "BackendNotFound")}
    assert listener_of(found, "tls")["supportedKinds"] == [{"group": "gateway.networking.k8s.io", "kind": "TLSRoute"}]
    assert (listener_of(found, "http")["attachedRoutes"], listener_of(found, "tls")["attachedRoutes"]) == (1, 1)
