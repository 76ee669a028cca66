"""Gateway conditions beyond a listener's own fields, through the whole controller in API mode (the API test server):
listeners in conflict (Conflicted, none of them served), an HTTPS listener whose certificate Secret is missing (its
routes counted and accepted, its host not served), listeners on ports nginx cannot listen on (a TCP service's, another
program's: PortUnavailable), and a Gateway's spec.addresses, infrastructure and parametersRef,
as the conformance cases GatewayWithAttachedRoutes, GatewayStaticAddresses, GatewayOptionalAddressValue,
GatewayInfrastructure and GatewayInvalidParametersRef assert them (our own manifests)."""
from __future__ import annotations

import socket
from typing import Any, Iterator

import pytest

from tests.e2e.gateway.conftest import GatewayStage
from tests.e2e.gateway.api_stage import api_gateway_stage
from tests.e2e.tls.pki import https_get
from tests.support import gateway_objects as gw
from tests.support.gateway_status import conditions, listener_status, observed
from tests.support.net import free_port, wait_for

ADDRESS = "192.0.2.20"  # the controller's address (--publish-status-address)
UNUSABLE = "192.0.2.21"
ACCEPTED = ("True", "Accepted")
RESOLVED = ("True", "ResolvedRefs")
TCP_SERVICES = "cond-ports/tcp-services"  # --tcp-services-configmap


@pytest.fixture(scope="module")
def api(tmp_path_factory, echo) -> Iterator[GatewayStage]:
    with api_gateway_stage(tmp_path_factory.mktemp("status-conditions"), tmp_path_factory.mktemp("kubeconfig"), echo,
                           f"--publish-status-address={ADDRESS}", "--election-id=status-conditions",
                           f"--tcp-services-configmap={TCP_SERVICES}") as stage:
        yield stage


def gateway_status(api: GatewayStage, name: str, ns: str, **want: tuple[str, str]) -> dict[str, Any]:
    """The Gateway's status written for its current generation, once its own conditions hold `want` (condition type
    → (status, reason))."""
    found: dict[str, Any] = {}

    def written() -> bool:
        obj = api.cluster.read("Gateway", name, ns)
        found.clear()
        found.update(obj.get("status") or {})
        return (bool(found.get("listeners")) and observed(obj, [found, *found["listeners"]])
                and all(conditions(found).get(kind) == value for kind, value in want.items()))
    try:
        wait_for(written, 15, what=f"Gateway {ns}/{name}'s status with {want}")
    except AssertionError as err:
        raise AssertionError(f"{err}; the last status: {found}") from None
    return found


def route_conditions(api: GatewayStage, name: str, ns: str, expect: dict[str, tuple[str, str]]) -> None:
    seen: list[dict[str, tuple[str, str]]] = []

    def written() -> bool:
        obj = api.cluster.read("HTTPRoute", name, ns)
        ours = [p for p in (obj.get("status") or {}).get("parents") or [] if p["controllerName"] == gw.CONTROLLER]
        seen[:] = [conditions(p) for p in ours]
        return bool(ours) and observed(obj, ours) and seen[0] == expect
    wait_for(written, 15, what=f"HTTPRoute {ns}/{name}'s parent {expect} (now {seen})")


def test_listeners_on_one_port_with_one_hostname_are_conflicted_and_none_is_served(api):
    ns = "cond-conflict"
    api.cluster.apply(*api.backend("GW-COND-CONFLICT", "conflict-app", namespace=ns),
                      gw.gateway("conflicted", ns=ns, listeners=[
        gw.listener("first", hostname="same.conflict.example.com"),
        gw.listener("second", hostname="same.conflict.example.com"),
        gw.listener("distinct", hostname="distinct.conflict.example.com")]))
    for host in ("same.conflict.example.com", "distinct.conflict.example.com"):
        api.cluster.apply(gw.http_route(host.split(".")[0], ns=ns, parents=[{"name": "conflicted"}], hostnames=[host],
                                        rules=[gw.rule(gw.backend_ref("conflict-app"))]))
    status = gateway_status(api, "conflicted", ns, Accepted=("True", "ListenersNotValid"))
    for name in ("first", "second"):
        assert conditions(listener_status(status, name)) == {
            "Accepted": ("False", "HostnameConflict"), "Programmed": ("False", "HostnameConflict"),
            "ResolvedRefs": RESOLVED, "Conflicted": ("True", "HostnameConflict")}
    assert conditions(listener_status(status, "distinct"))["Conflicted"] == ("False", "NoConflicts")
    api.expect_answer("distinct.conflict.example.com", "/", "GW-COND-CONFLICT")
    assert api.answer("same.conflict.example.com", "/")["status"] == 404  # no listener picked as the winner


def test_http_and_https_listeners_on_one_port_are_a_protocol_conflict(api):
    ns = "cond-protocol"
    https = {**gw.listener("secure", port=443, protocol="HTTPS"),
             "tls": {"certificateRefs": [{"kind": "Secret", "name": "any"}]}}
    api.cluster.apply(gw.gateway("mixed-port", ns=ns, listeners=[gw.listener("plain", port=443), https]))
    status = gateway_status(api, "mixed-port", ns, Accepted=("False", "ListenersNotValid"))
    for name in ("plain", "secure"):
        assert conditions(listener_status(status, name))["Conflicted"] == ("True", "ProtocolConflict")


def test_a_listener_whose_certificate_is_missing_counts_its_routes_and_serves_none(api):
    """GatewayWithAttachedRoutes, "AttachedRoutes set even when the Gateway has unresolved refs"."""
    ns = "cond-unresolved"
    host = "unresolved.status.example.com"
    selector = {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
    tls = {**gw.listener("tls", port=443, protocol="HTTPS", namespaces=selector, kinds=["HTTPRoute"]),
           "tls": {"mode": "Terminate", "certificateRefs": [{"group": "", "kind": "Secret", "name": "does-not-exist"}]}}
    api.cluster.apply(gw.gateway("unresolved-gateway", ns=ns, listeners=[tls]),
                      gw.http_route("route-4", ns=ns, hostnames=[host],
                                    parents=[{"name": "unresolved-gateway", "sectionName": "tls"}],
                                    rules=[gw.rule(gw.backend_ref("does-not-exist", 8080))]))
    route_conditions(api, "route-4", ns, {"Accepted": ACCEPTED, "ResolvedRefs": ("False", "BackendNotFound")})
    listener = listener_status(gateway_status(api, "unresolved-gateway", ns), "tls")
    assert listener["attachedRoutes"] == 1
    assert listener["supportedKinds"] == [{"group": gw.GROUP, "kind": "HTTPRoute"}]
    assert conditions(listener) == {"Accepted": ACCEPTED, "Programmed": ("False", "Invalid"),
                                    "ResolvedRefs": ("False", "InvalidCertificateRef"),
                                    "Conflicted": ("False", "NoConflicts")}
    # Not served without its certificate: the default server's 404, not the route's 500 for its missing backend.
    assert https_get(api.controller.https_port, host).status == 404
    [parent] = (api.cluster.read("HTTPRoute", "route-4", ns).get("status") or {})["parents"]
    assert parent["conditions"][0]["message"] == (
        f"attached to tls; its hosts are not served: listener tls: TLS Secret {ns}/does-not-exist not found (reason "
        "InvalidCertificateRef)")


def test_listeners_on_ports_nginx_cannot_listen_on_are_port_unavailable(api):
    """A TCP service's port (the ConfigMap and the Gateway in one change) and a port another program holds: the
    listeners are not accepted (PortUnavailable) and say why; the Gateway's other listener is served."""
    ns, tcp_port = TCP_SERVICES.split("/")[0], free_port()
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        taken_port = squatter.getsockname()[1]
        api.cluster.apply(*api.backend("GW-COND-PORTS", "ports-app", namespace=ns),
                          {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tcp-services", "namespace": ns},
                           "data": {str(tcp_port): f"{ns}/ports-app:80"}},
                          gw.gateway("ports", ns=ns, listeners=[gw.listener("tcp", port=tcp_port),
                                                                gw.listener("taken", port=taken_port),
                                                                gw.listener("http")]),
                          gw.http_route("ports-route", ns=ns, parents=[{"name": "ports"}],
                                        hostnames=["ports.status.example.com"],
                                        rules=[gw.rule(gw.backend_ref("ports-app"))]))
        api.expect_answer("ports.status.example.com", "/", "GW-COND-PORTS")
        status = gateway_status(api, "ports", ns, Accepted=("True", "ListenersNotValid"))
        assert conditions(status)["Programmed"] == ("True", "Programmed")
        for name, why in (("tcp", "a TCP service of --tcp-services-configmap listens on it"),
                          ("taken", "another program listens on it")):
            listener = listener_status(status, name)
            assert conditions(listener)["Accepted"] == ("False", "PortUnavailable"), listener
            assert conditions(listener)["Programmed"] == ("False", "Invalid"), listener
            assert why in listener["conditions"][0]["message"], listener
            assert listener["attachedRoutes"] == 0
        assert conditions(listener_status(status, "http"))["Programmed"] == ("True", "Programmed")
        assert listener_status(status, "http")["attachedRoutes"] == 1
        route_conditions(api, "ports-route", ns, {"Accepted": ACCEPTED, "ResolvedRefs": RESOLVED})


def test_a_gateway_asking_for_addresses_is_programmed_only_on_those_the_controller_has(api):
    """GatewayStaticAddresses: an address type not taken refuses the Gateway, an address the controller does not have
    leaves it not programmed, and the usable one is its status address."""
    ns = "cond-addresses"
    gateway = gw.gateway("static-addresses", ns=ns, listeners=[gw.listener("http")])
    asked = [{"type": "test/fake-invalid-type", "value": "fake address"}, {"value": UNUSABLE}, {"value": ADDRESS}]
    api.cluster.apply({**gateway, "spec": {**gateway["spec"], "addresses": asked}})
    gateway_status(api, "static-addresses", ns, Accepted=("False", "UnsupportedAddress"))
    api.cluster.apply({**gateway, "spec": {**gateway["spec"], "addresses": asked[1:]}})
    status = gateway_status(api, "static-addresses", ns, Accepted=ACCEPTED, Programmed=("False", "AddressNotUsable"))
    assert UNUSABLE in next(c["message"] for c in status["conditions"] if c["type"] == "Programmed")
    api.cluster.apply({**gateway, "spec": {**gateway["spec"], "addresses": asked[2:]}})
    status = gateway_status(api, "static-addresses", ns, Accepted=ACCEPTED, Programmed=("True", "Programmed"))
    assert status["addresses"] == [{"type": "IPAddress", "value": ADDRESS}]
    http = listener_status(status, "http")
    assert (conditions(http)["Accepted"], conditions(http)["ResolvedRefs"], http["attachedRoutes"]) == (
        ACCEPTED, RESOLVED, 0)


def test_an_address_without_a_value_is_the_controllers(api):
    """GatewayOptionalAddressValue."""
    ns = "cond-optional-address"
    gateway = gw.gateway("without-address-value", ns=ns, listeners=[gw.listener("http")])
    api.cluster.apply({**gateway, "spec": {**gateway["spec"], "addresses": [{"type": "IPAddress"}]}})
    status = gateway_status(api, "without-address-value", ns, Accepted=ACCEPTED, Programmed=("True", "Programmed"))
    assert status["addresses"] == [{"type": "IPAddress", "value": ADDRESS}]


def test_infrastructure_labels_are_accepted_and_parameters_are_not(api):
    """GatewayInfrastructure (its Accepted part: pyngress creates no resource to label) and
    GatewayInvalidParametersRef; a GatewayClass with parameters is not accepted either."""
    ns = "cond-infrastructure"
    labelled = gw.gateway("infrastructure-metadata", ns=ns, listeners=[gw.listener("http")])
    labelled["spec"]["infrastructure"] = {"annotations": {"key1": "value1"}, "labels": {"key2": "value2"}}
    invalid = gw.gateway("invalid-parameters-ref", ns=ns, listeners=[gw.listener("http")])
    invalid["spec"]["infrastructure"] = {"parametersRef": {"group": "invalid.io", "kind": "InvalidParameters",
                                                           "name": "invalid"}}
    with_parameters = gw.gateway_class("with-parameters")
    with_parameters["spec"]["parametersRef"] = {"group": "", "kind": "ConfigMap", "name": "params",
                                                "namespace": ns}
    api.cluster.apply(labelled, invalid, with_parameters,
                      gw.gateway("of-class-with-parameters", ns=ns, class_name="with-parameters",
                                 listeners=[gw.listener("http")]))
    gateway_status(api, "infrastructure-metadata", ns, Accepted=ACCEPTED)
    gateway_status(api, "invalid-parameters-ref", ns, Accepted=("False", "InvalidParameters"))
    gateway_status(api, "of-class-with-parameters", ns, Accepted=("False", "InvalidParameters"))

    def class_refused() -> bool:
        obj = api.cluster.read("GatewayClass", "with-parameters", ns=None)
        status = obj.get("status") or {}
        return conditions(status) == {"Accepted": ("False", "InvalidParameters")} and observed(obj, [status])
    wait_for(class_refused, 15, what="GatewayClass with-parameters not accepted (InvalidParameters)")
