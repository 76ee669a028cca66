"""The Gateway API conformance suite's cases (kubernetes-sigs/gateway-api, conformance/tests) that need no real
cluster, one test per case (our own manifests, the case's assertions): through the API test server where the case
asserts status (route parents' conditions, listener conditions, observedGeneration), else in manifests mode. One
controller per mode for the module; each case has its own Gateways, hostnames and namespaces.

Cases covered by the other e2e files:
- HTTPRouteSimpleSameNamespace, HTTPRouteExactPathMatching, HTTPRoutePathMatchOrder →
  test_httproute.py::test_simple_route_exact_path_and_path_match_order
- HTTPRouteHeaderMatching, HTTPRouteQueryParamMatching, HTTPRouteMethodMatching →
  test_httproute.py::test_header_query_and_method_matches_with_fallback_to_the_next_path
- HTTPRouteMatchingAcrossRoutes → test_httproute.py::test_matching_across_routes_and_hostnames
- HTTPRouteListenerHostnameMatching, HTTPRouteHostnameIntersection →
  test_httproute.py::test_listener_hostnames_and_hostname_intersection
- HTTPRouteWeight → test_httproute.py::test_weights_split_traffic_within_tolerance
- HTTPRouteRequestHeaderModifier, HTTPRouteResponseHeaderModifier →
  test_httproute.py::test_request_and_response_header_modifiers
- HTTPRouteRedirectScheme, HTTPRouteRedirectHostAndStatus, HTTPRouteRedirectPath, HTTPRouteRedirectPort →
  test_httproute.py::test_redirects
- HTTPRouteRewriteHost, HTTPRouteRewritePath → test_httproute.py::test_url_rewrite_of_host_and_path
- HTTPRouteReferenceGrant, HTTPRouteInvalidNonExistentBackendRef, HTTPRouteInvalidCrossNamespaceBackendRef →
  test_httproute.py::test_cross_namespace_backends_need_a_reference_grant_and_bad_refs_answer_500 (traffic) and
  test_status.py::test_a_route_to_a_missing_service_has_resolved_refs_false_and_answers_500,
  test_status.py::test_a_backend_in_another_namespace_needs_a_reference_grant (status)
- HTTPRouteInvalidParentRefNotMatchingSectionName →
  test_status.py::test_a_parent_ref_to_a_missing_listener_is_no_matching_parent
- HTTPRouteObservedGenerationBump → test_status.py::test_observed_generation_follows_a_spec_change_with_one_status_write
- GatewayObservedGenerationBump → test_status.py::test_a_listener_on_a_port_not_served_is_not_accepted
- HTTPRouteHTTPSListener → test_https_listener.py
- HTTPRouteRequestMirror, HTTPRouteRequestMultipleMirrors, HTTPRouteRequestPercentageMirror →
  test_request_mirror.py
- GRPCExactMethodMatching, GRPCRouteHeaderMatching, GRPCRouteRequestHeaderModifier (set) →
  test_grpcroute.py::test_exact_method_and_header_matches_reach_their_h2c_backends
- GRPCRouteWeight → test_grpcroute.py::test_weights_split_calls_between_backends
- TLSRouteSimpleSameNamespace, TLSRouteHostnameIntersection, TLSRouteInvalidReferenceGrant → test_tlsroute.py
- TLSRouteTerminateSimpleSameNamespace, TLSRouteMixedTerminationSameNamespace (on port 443: traffic in manifests
  mode, status through the API test server), TLSRouteListenerTerminateSupportedKinds, and TLSRoute weights and
  wildcard host names → test_tls_terminate_and_weights.py
- GatewayWithAttachedRoutes's part "AttachedRoutes set even when the Gateway has unresolved refs" →
  test_status_conditions.py::test_a_listener_whose_certificate_is_missing_counts_its_routes_and_serves_none
- GatewayStaticAddresses, GatewayOptionalAddressValue, GatewayInvalidParametersRef → test_status_conditions.py
- HTTPRouteRequestHeaderModifierBackendWeights, HTTPRouteBackendRequestHeaderModifier,
  HTTPRouteBackendRequestRedirect, HTTPRouteBackendURLRewrite, HTTPRouteCORS,
  HTTPRouteHTTPSListenerDetectMisdirectedRequests → test_backend_filters_and_cors.py
- HTTPRouteListenerPortMatching, GatewayWithAttachedRoutesWithPort8080 → test_listener_ports.py
- HTTPRouteServiceTypes (and ExternalName Services, and filters on GRPCRoute backendRefs) →
  test_service_types_and_grpc_filters.py
- HTTPRouteRetry, HTTPRouteRetryWithTimeouts, HTTPRouteRetryConnectionError, HTTPRouteTimeoutRequest,
  HTTPRouteTimeoutBackendRequest, HTTPRouteBackendProtocolH2C, HTTPRouteBackendProtocolWebSocket →
  test_backend_protocols_retries_timeouts.py (a connection error after the last retry answers 503, as
  HTTPRouteRetryConnectionError asserts), with one difference docs/gateway-api.md explains: the h2c backend is
  reached from HTTP/1.1 (or HTTP/2 over TLS) clients, not from HTTP/2 with prior knowledge on the HTTP listener,
  which nginx 1.22 does not speak (as GRPCRouteListenerHostnameMatching below)
- GatewayFrontendClientCertificateValidation, GatewayFrontendClientCertificateValidationInsecureFallback,
  GatewayFrontendInvalidDefaultClientCertificateValidation, GatewayInvalidFrontendClientCertificateValidation,
  BackendTLSPolicy, BackendTLSPolicyInvalidCACertificateRef, BackendTLSPolicyInvalidKind,
  BackendTLSPolicyConflictResolution, BackendTLSPolicyObservedGenerationBump, BackendTLSPolicyGRPCRoute,
  GatewayTLSBackendClientCertificate, GatewayInvalidTLSBackendConfiguration → test_gateway_tls_validation.py
- BackendTLSPolicyTLSRouteTerminate → test_tls_terminate_and_weights.py

Cases that cannot pass, for a missing feature:
- HTTPRouteMultipleGateways: every Gateway shares the controller's addresses and ports, so two Gateways' routes for
  the same host and path cannot answer differently per Gateway address.
- GatewayInfrastructure: it looks for a ServiceAccount, Pod or Service made for the Gateway, carrying its
  infrastructure labels and annotations; pyngress makes none (its Accepted part is in test_status_conditions.py).
- BackendTLSPolicySANValidation: nginx verifies a backend's certificate for one name (validation.hostname), so a
  policy with subjectAltNames is not accepted (its backends answer 500).
- TLSRouteListenerTerminateNotSupported, TLSRouteListenerMixedTerminationNotSupported: they run only for an
  implementation without Terminate or mixed termination; pyngress has both (test_tls_terminate_and_weights.py).
- GRPCRouteListenerHostnameMatching: gRPC on HTTP listeners (HTTP/2 cleartext from the client) is not served; nginx
  1.22 speaks HTTP/2 on the HTTPS port only, docs/gateway-api.md says why a preface sniffer on port 80 is not there
  (GRPCRouteNamedRule is tested here on an HTTPS listener).
"""
from __future__ import annotations

import base64
from typing import Any, Iterator

import pytest

from tests.e2e.gateway.conftest import GatewayStage
from tests.e2e.gateway.test_grpcroute import call, grpc_stage, h2c_port  # noqa: F401 - fixtures used below
from tests.e2e.gateway.api_stage import api_gateway_stage
from tests.support import gateway_objects as gw
from tests.support.gateway_status import conditions, listener_status, observed
from tests.support.net import wait_for

ROUTE_KINDS = [{"group": gw.GROUP, "kind": "HTTPRoute"}, {"group": gw.GROUP, "kind": "GRPCRoute"}]


# --- API mode: status ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def api(tmp_path_factory, echo) -> Iterator[GatewayStage]:
    """A controller watching the API test server, with the passthrough proxy (for TLS listeners)."""
    with api_gateway_stage(tmp_path_factory.mktemp("conformance-api"), tmp_path_factory.mktemp("kubeconfig"), echo,
                           "--enable-ssl-passthrough", "--election-id=conformance-cases") as stage:
        yield stage


def gateway_status(api: GatewayStage, name: str, ns: str, **want: tuple[str, str]) -> dict[str, Any]:
    """The Gateway's status written for its current generation, once its listeners' conditions include `want`
    (listener name → (condition type, reason))."""
    found: dict[str, Any] = {}

    def written() -> bool:
        obj = api.cluster.read("Gateway", name, ns)
        found.clear()
        found.update(obj.get("status") or {})
        listeners = {item["name"]: item for item in found.get("listeners") or ()}
        return (bool(listeners) and observed(obj, [found, *listeners.values()])
                and all(kind in listeners and conditions(listeners[kind]).get(c) == ("False", reason)
                        for kind, (c, reason) in want.items()))
    try:
        wait_for(written, 15, what=f"Gateway {ns}/{name}'s status with {want}")
    except AssertionError as err:
        raise AssertionError(f"{err}; the last status: {found}") from None
    return found


def route_parents(api: GatewayStage, kind: str, name: str, ns: str,
                  expect: dict[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """The route's parent entries of pyngress for its current generation, once the first holds `expect`."""
    found: list[dict[str, Any]] = []

    def written() -> bool:
        obj = api.cluster.read(kind, name, ns)
        found[:] = [p for p in (obj.get("status") or {}).get("parents") or [] if p["controllerName"] == gw.CONTROLLER]
        return bool(found) and observed(obj, found) and conditions(found[0]) == expect
    try:
        wait_for(written, 15, what=f"{kind} {ns}/{name}'s parents {expect}")
    except AssertionError as err:
        raise AssertionError(f"{err}; the last: {[conditions(p) for p in found]}") from None
    return found


ACCEPTED = ("True", "Accepted")
RESOLVED = ("True", "ResolvedRefs")


def test_gatewayclass_observed_generation_bump(api):
    """GatewayClassObservedGenerationBump: a spec change of a GatewayClass is observed by its Accepted condition."""
    name = "conformance-bump"
    api.cluster.apply(gw.gateway_class(name))

    def accepted_at(generation: int) -> bool:
        obj = api.cluster.read("GatewayClass", name, ns=None)
        status = obj.get("status") or {}
        return (obj["metadata"]["generation"] == generation and conditions(status) == {"Accepted": ACCEPTED}
                and observed(obj, [status]))
    wait_for(lambda: accepted_at(1), 15, what="the class accepted at generation 1")
    api.cluster.apply({**gw.gateway_class(name), "spec": {"controllerName": gw.CONTROLLER,
                                                           "description": "a new generation"}})
    wait_for(lambda: accepted_at(2), 15, what="the class accepted at generation 2")


def test_gateway_name_maximum_length(api):
    """GatewayNameMaximumLength: a Gateway with a name of 253 characters gets its conditions for its generation."""
    name = "g" * 253
    api.cluster.apply(gw.gateway(name, ns="conf-long-name", listeners=[gw.listener("http")]))
    assert conditions(gateway_status(api, name, "conf-long-name"))["Accepted"] == ACCEPTED


def test_gateway_listener_unsupported_protocol(api):
    """GatewayListenerUnsupportedProtocol: a listener of a protocol not served is not accepted, the Gateway's other
    listeners are."""
    ns = "conf-protocol"
    api.cluster.apply(gw.gateway("only-unsupported", ns=ns, listeners=[gw.listener("invalid", protocol="UDP")]),
                      gw.gateway("mixed", ns=ns, listeners=[gw.listener("http"),
                                                            gw.listener("invalid", protocol="UDP")]))
    status = gateway_status(api, "only-unsupported", ns)
    assert conditions(status)["Accepted"] == ("False", "ListenersNotValid")
    invalid = listener_status(status, "invalid")
    assert conditions(invalid)["Accepted"] == ("False", "UnsupportedProtocol")
    assert invalid["supportedKinds"] == []
    status = gateway_status(api, "mixed", ns)
    assert conditions(status)["Accepted"] == ("True", "ListenersNotValid")  # one listener is accepted
    assert conditions(listener_status(status, "http"))["Accepted"] == ACCEPTED
    assert conditions(listener_status(status, "invalid"))["Accepted"] == ("False", "UnsupportedProtocol")


def test_gateway_invalid_route_kind(api):
    """GatewayInvalidRouteKind: a listener allowing only unknown route kinds has ResolvedRefs False
    (InvalidRouteKinds) and no supportedKinds; with HTTPRoute among them, supportedKinds is HTTPRoute."""
    ns = "conf-route-kind"
    api.cluster.apply(
        gw.gateway("only-invalid", ns=ns, listeners=[gw.listener("http", kinds=["FooRoute"])]),
        gw.gateway("some-invalid", ns=ns, listeners=[gw.listener("http", kinds=["FooRoute", "HTTPRoute"])]))
    status = gateway_status(api, "only-invalid", ns, http=("ResolvedRefs", "InvalidRouteKinds"))
    assert listener_status(status, "http")["supportedKinds"] == []
    status = gateway_status(api, "some-invalid", ns, http=("ResolvedRefs", "InvalidRouteKinds"))
    assert listener_status(status, "http")["supportedKinds"] == [{"group": gw.GROUP, "kind": "HTTPRoute"}]


def test_gateway_invalid_tls_configuration(api):
    """GatewayInvalidTLSConfiguration: an HTTPS listener whose certificateRef is a missing Secret, of another group
    or kind, or a malformed Secret has ResolvedRefs False (InvalidCertificateRef)."""
    ns = "conf-bad-tls"
    garbage = base64.b64encode(b"not a PEM").decode()
    api.cluster.apply({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                       "metadata": {"name": "malformed", "namespace": ns},
                       "data": {"tls.crt": garbage, "tls.key": garbage}})
    refs = {"nonexistent-secret": {"kind": "Secret", "name": "missing"},
            "unsupported-group": {"group": "wrong.group.company.io", "kind": "Secret", "name": "malformed"},
            "unsupported-kind": {"kind": "WrongKind", "name": "malformed"},
            "malformed-secret": {"kind": "Secret", "name": "malformed"}}
    for name, ref in refs.items():
        https = {**gw.listener("https", port=443, protocol="HTTPS"), "tls": {"certificateRefs": [ref]}}
        api.cluster.apply(gw.gateway(name, ns=ns, listeners=[https]))
    for name in refs:
        status = gateway_status(api, name, ns, https=("ResolvedRefs", "InvalidCertificateRef"))
        assert {"group": gw.GROUP, "kind": "HTTPRoute"} in listener_status(status, "https")["supportedKinds"], name


def https_gateway(name: str, ns: str, secret_ns: str) -> dict[str, Any]:
    return gw.gateway(name, ns=ns, listeners=[gw.listener("https", port=443, protocol="HTTPS", certificate="cert",
                                                          certificate_namespace=secret_ns)])


@pytest.fixture(scope="module")
def certificate(api, tmp_path_factory) -> dict[str, Any]:
    """A TLS Secret "cert" in namespace conf-certs."""
    from tests.e2e.tls.pki import TestCA, tls_secret
    ca = TestCA(tmp_path_factory.mktemp("conformance-ca"))
    secret = tls_secret("cert", ca.issue("conf.example.com"), namespace="conf-certs")
    api.cluster.apply(secret)
    return secret


def test_gateway_secret_missing_reference_grant(api, certificate):
    """GatewaySecretMissingReferenceGrant: a certificate in another namespace without a ReferenceGrant:
    ResolvedRefs False (RefNotPermitted)."""
    api.cluster.apply(https_gateway("secret-missing-grant", "conf-gw-missing", "conf-certs"))
    gateway_status(api, "secret-missing-grant", "conf-gw-missing", https=("ResolvedRefs", "RefNotPermitted"))


def test_gateway_secret_invalid_reference_grant(api, certificate):
    """GatewaySecretInvalidReferenceGrant: a ReferenceGrant for another Secret name does not allow the reference."""
    api.cluster.apply(gw.reference_grant("other-secret", ns="conf-certs", from_namespace="conf-gw-invalid",
                                         from_kind="Gateway", to_kind="Secret", to_name="not-cert"),
                      https_gateway("secret-invalid-grant", "conf-gw-invalid", "conf-certs"))
    gateway_status(api, "secret-invalid-grant", "conf-gw-invalid", https=("ResolvedRefs", "RefNotPermitted"))


def resolved_and_programmed(api: GatewayStage, name: str, ns: str) -> None:
    def ok() -> bool:
        status = gateway_status(api, name, ns)
        found = conditions(listener_status(status, "https"))
        return found["ResolvedRefs"] == RESOLVED and found["Programmed"] == ("True", "Programmed")
    wait_for(ok, 15, what=f"Gateway {ns}/{name}'s HTTPS listener resolved and programmed")


def test_gateway_secret_reference_grant_all_in_namespace(api, certificate):
    """GatewaySecretReferenceGrantAllInNamespace: a ReferenceGrant to every Secret of the namespace allows it."""
    api.cluster.apply(gw.reference_grant("all-secrets", ns="conf-certs", from_namespace="conf-gw-all",
                                         from_kind="Gateway", to_kind="Secret"),
                      https_gateway("secret-grant-all", "conf-gw-all", "conf-certs"))
    resolved_and_programmed(api, "secret-grant-all", "conf-gw-all")


def test_gateway_secret_reference_grant_specific(api, certificate):
    """GatewaySecretReferenceGrantSpecific: a ReferenceGrant to that Secret by name allows it."""
    api.cluster.apply(gw.reference_grant("this-secret", ns="conf-certs", from_namespace="conf-gw-specific",
                                         from_kind="Gateway", to_kind="Secret", to_name="cert"),
                      https_gateway("secret-grant-specific", "conf-gw-specific", "conf-certs"))
    resolved_and_programmed(api, "secret-grant-specific", "conf-gw-specific")


def test_gateway_modify_listeners(api):
    """GatewayModifyListeners: a listener added to a Gateway appears in its status, a listener removed leaves it."""
    ns = "conf-modify"
    api.cluster.apply(gw.gateway("add-listener", ns=ns, listeners=[gw.listener("http")]),
                      gw.gateway("remove-listener", ns=ns, listeners=[gw.listener("http"),
                                                                      gw.listener("other", hostname="x.example.com")]))
    assert len(gateway_status(api, "add-listener", ns)["listeners"]) == 1
    assert len(gateway_status(api, "remove-listener", ns)["listeners"]) == 2
    api.cluster.apply(gw.gateway("add-listener", ns=ns, listeners=[
                          gw.listener("http"), gw.listener("other", hostname="x.example.com")]),
                      gw.gateway("remove-listener", ns=ns, listeners=[gw.listener("http")]))
    added = gateway_status(api, "add-listener", ns)
    assert sorted(item["name"] for item in added["listeners"]) == ["http", "other"]
    assert conditions(listener_status(added, "other"))["Accepted"] == ACCEPTED
    assert conditions(added)["Accepted"] == ACCEPTED
    assert [item["name"] for item in gateway_status(api, "remove-listener", ns)["listeners"]] == ["http"]


def test_gateway_with_attached_routes(api):
    """GatewayWithAttachedRoutes (its unresolved-certificate part: test_status_conditions.py): a listener counts
    the routes attached to it (one, two), not a route whose hostname it does not take (NoMatchingListenerHostname)."""
    ns = "conf-attached"
    selector = {"from": "Selector", "selector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}

    def attached_route(name: str, gateway: str, *hostnames: str) -> dict[str, Any]:
        return gw.http_route(name, ns=ns, parents=[{"name": gateway}], hostnames=hostnames,
                             rules=[gw.rule(gw.backend_ref("attached-app"))])
    api.cluster.apply(
        *api.backend("GW-CONF-ATTACHED", "attached-app", namespace=ns),
        gw.gateway("one-route", ns=ns, listeners=[gw.listener("http", namespaces=selector, kinds=["HTTPRoute"])]),
        gw.gateway("two-routes", ns=ns, listeners=[gw.listener("http", hostname="foo.attached.example.com",
                                                               namespaces=selector, kinds=["HTTPRoute"])]),
        attached_route("route-1", "one-route", "one.attached.example.com"), attached_route("route-2", "two-routes"),
        attached_route("route-3", "two-routes"), attached_route("not-accepted", "two-routes", "bar.example.org"))
    route_parents(api, "HTTPRoute", "not-accepted", ns, {"Accepted": ("False", "NoMatchingListenerHostname"),
                                                         "ResolvedRefs": RESOLVED})
    for gateway, count in (("one-route", 1), ("two-routes", 2)):
        wait_for(lambda: listener_status(gateway_status(api, gateway, ns), "http")["attachedRoutes"] == count, 15,
                 what=f"{count} routes attached to Gateway {gateway}")


def test_httproute_disallowed_kind(api):
    """HTTPRouteDisallowedKind: an HTTPRoute on a Gateway whose only listener allows TLSRoutes is not accepted
    (NotAllowedByListeners) and not counted."""
    ns = "conf-disallowed"
    api.cluster.apply(*api.backend("GW-CONF-DISALLOWED", "disallowed-app", namespace=ns),
                      gw.gateway("tls-only", ns=ns, listeners=[gw.listener("tls", passthrough=True, kinds=["TLSRoute"])]),
                      gw.http_route("disallowed", ns=ns, parents=[{"name": "tls-only"}],
                                    rules=[gw.rule(gw.backend_ref("disallowed-app"))]))
    route_parents(api, "HTTPRoute", "disallowed", ns, {"Accepted": ("False", "NotAllowedByListeners"),
                                                       "ResolvedRefs": RESOLVED})
    assert listener_status(gateway_status(api, "tls-only", ns), "tls")["attachedRoutes"] == 0


def test_httproute_invalid_cross_namespace_parent_ref(api):
    """HTTPRouteInvalidCrossNamespaceParentRef: a route of another namespace on a listener allowing the Gateway's own
    namespace only is not accepted (NotAllowedByListeners) and not served."""
    api.cluster.apply(*api.backend("GW-CONF-WEB", "web", namespace="conf-web"),
                      gw.gateway("same-only", ns="conf-infra", listeners=[gw.listener("http")]),
                      gw.http_route("invalid-parent", ns="conf-web", hostnames=["invalid-parent.example.com"],
                                    parents=[{"name": "same-only", "namespace": "conf-infra"}],
                                    rules=[gw.rule(gw.backend_ref("web"))]))
    route_parents(api, "HTTPRoute", "invalid-parent", "conf-web", {"Accepted": ("False", "NotAllowedByListeners"),
                                                                   "ResolvedRefs": RESOLVED})
    assert api.answer("invalid-parent.example.com", "/")["status"] == 404


@pytest.fixture(scope="module")
def ports_gateway(api) -> str:
    """Gateway conf-ports/ports: one HTTP listener "http" on port 80, for routes of its namespace; its namespace."""
    ns = "conf-ports"
    api.cluster.apply(*api.backend("GW-CONF-PORTS", "app", namespace=ns),
                      gw.gateway("ports", ns=ns, listeners=[gw.listener("http")]))
    return ns


def test_httproute_invalid_parentref_not_matching_listener_port(api, ports_gateway):
    """HTTPRouteInvalidParentRefNotMatchingListenerPort: a parentRef port no listener has: NoMatchingParent."""
    api.cluster.apply(gw.http_route("wrong-port", ns=ports_gateway, hostnames=["wrong-port.example.com"],
                                    parents=[{"name": "ports", "port": 81}], rules=[gw.rule(gw.backend_ref("app"))]))
    route_parents(api, "HTTPRoute", "wrong-port", ports_gateway, {"Accepted": ("False", "NoMatchingParent"),
                                                                  "ResolvedRefs": RESOLVED})
    assert api.answer("wrong-port.example.com", "/")["status"] == 404


def test_httproute_invalid_parentref_section_name_not_matching_port(api, ports_gateway):
    """HTTPRouteInvalidParentRefSectionNameNotMatchingPort: the listener a sectionName names is not on the parentRef's
    port: NoMatchingParent."""
    api.cluster.apply(gw.http_route("section-port", ns=ports_gateway, hostnames=["section-port.example.com"],
                                    parents=[{"name": "ports", "sectionName": "http", "port": 81}],
                                    rules=[gw.rule(gw.backend_ref("app"))]))
    route_parents(api, "HTTPRoute", "section-port", ports_gateway, {"Accepted": ("False", "NoMatchingParent"),
                                                                    "ResolvedRefs": RESOLVED})
    assert api.answer("section-port.example.com", "/")["status"] == 404


def test_httproute_invalid_backendref_unknown_kind(api, ports_gateway):
    """HTTPRouteInvalidBackendRefUnknownKind: a backendRef of an unknown kind: ResolvedRefs False (InvalidKind),
    the route accepted, and 500 for the request."""
    host = "unknown-kind.example.com"
    api.cluster.apply(gw.http_route("unknown-kind", ns=ports_gateway, hostnames=[host], parents=[{"name": "ports"}],
                                    rules=[gw.rule({**gw.backend_ref("app", kind="UnknownKind"), "group": "x.io"})]))
    route_parents(api, "HTTPRoute", "unknown-kind", ports_gateway, {"Accepted": ACCEPTED,
                                                                    "ResolvedRefs": ("False", "InvalidKind")})
    api.expect_answer(host, "/", 500)


def test_httproute_invalid_reference_grant(api, ports_gateway):
    """HTTPRouteInvalidReferenceGrant: a ReferenceGrant for another namespace's routes does not allow the backend:
    RefNotPermitted, 500."""
    host = "invalid-grant.example.com"
    api.cluster.apply(*api.backend("GW-CONF-FAR", "far", namespace="conf-far"),
                      gw.reference_grant("for-others", ns="conf-far", from_namespace="conf-someone-else"),
                      gw.http_route("invalid-grant", ns=ports_gateway, hostnames=[host], parents=[{"name": "ports"}],
                                    rules=[gw.rule(gw.backend_ref("far", ns="conf-far"))]))
    route_parents(api, "HTTPRoute", "invalid-grant", ports_gateway, {"Accepted": ACCEPTED,
                                                                     "ResolvedRefs": ("False", "RefNotPermitted")})
    api.expect_answer(host, "/", 500)


def test_httproute_partially_invalid_via_invalid_reference_grant(api, ports_gateway):
    """HTTPRoutePartiallyInvalidViaInvalidReferenceGrant: one rule's backend not permitted: ResolvedRefs False
    (RefNotPermitted), that rule answers 500, the other rule is served."""
    host = "partial.example.com"
    api.cluster.apply(*api.backend("GW-CONF-FAR2", "far2", namespace="conf-far2"),
                      gw.http_route("partial", ns=ports_gateway, hostnames=[host], parents=[{"name": "ports"}], rules=[
                          gw.rule(gw.backend_ref("far2", ns="conf-far2"), matches=[gw.path_match("/invalid")]),
                          gw.rule(gw.backend_ref("app"))]))
    route_parents(api, "HTTPRoute", "partial", ports_gateway, {"Accepted": ACCEPTED,
                                                               "ResolvedRefs": ("False", "RefNotPermitted")})
    api.expect_answer(host, "/", "GW-CONF-PORTS")
    assert api.answer(host, "/invalid")["status"] == 500


@pytest.fixture(scope="module")
def tls_gateway(api) -> str:
    """Gateway conf-tls/tls: a Passthrough TLS listener for *.tls.example.com and an HTTP one; its namespace."""
    ns = "conf-tls"
    api.cluster.apply(*api.backend("GW-CONF-TLS", "tls-app", namespace=ns), gw.gateway("tls", ns=ns, listeners=[
        gw.listener("tls", hostname="*.tls.example.com", passthrough=True), gw.listener("http")]))
    return ns


def tls_route(name: str, ns: str, backend: dict[str, Any], *, host: str = "a.tls.example.com",
              parent: dict[str, Any] | None = None) -> dict[str, Any]:
    return gw.tls_route(name, backend, ns=ns, hostnames=[host], parents=[parent or {"name": "tls", "sectionName": "tls"}])


def test_tlsroute_listener_passthrough_supported_kinds(api, tls_gateway):
    """TLSRouteListenerPassthroughSupportedKinds: a Passthrough TLS listener supports TLSRoute."""
    status = gateway_status(api, "tls", tls_gateway)
    assert listener_status(status, "tls")["supportedKinds"] == [{"group": gw.GROUP, "kind": "TLSRoute"}]
    assert conditions(listener_status(status, "tls"))["Accepted"] == ACCEPTED


def test_tlsroute_invalid_backendref_nonexistent(api, tls_gateway):
    """TLSRouteInvalidBackendRefNonexistent: a TLSRoute to a missing Service: ResolvedRefs False (BackendNotFound)."""
    api.cluster.apply(tls_route("tls-missing", tls_gateway, gw.backend_ref("missing")))
    route_parents(api, "TLSRoute", "tls-missing", tls_gateway, {"Accepted": ACCEPTED,
                                                                "ResolvedRefs": ("False", "BackendNotFound")})


def test_tlsroute_invalid_backendref_unknown_kind(api, tls_gateway):
    """TLSRouteInvalidBackendRefUnknownKind: a TLSRoute to an unknown kind: ResolvedRefs False (InvalidKind)."""
    api.cluster.apply(tls_route("tls-kind", tls_gateway, {**gw.backend_ref("tls-app", kind="UnknownKind"),
                                                          "group": "x.io"}, host="b.tls.example.com"))
    route_parents(api, "TLSRoute", "tls-kind", tls_gateway, {"Accepted": ACCEPTED,
                                                             "ResolvedRefs": ("False", "InvalidKind")})


def test_tlsroute_invalid_no_matching_listener_hostname(api, tls_gateway):
    """TLSRouteInvalidNoMatchingListenerHostname: no hostname of the route within the listener's:
    Accepted False (NoMatchingListenerHostname)."""
    api.cluster.apply(tls_route("tls-hostname", tls_gateway, gw.backend_ref("tls-app"), host="other.example.org"))
    route_parents(api, "TLSRoute", "tls-hostname", tls_gateway, {"Accepted": ("False", "NoMatchingListenerHostname"),
                                                                 "ResolvedRefs": RESOLVED})


def test_tlsroute_invalid_no_matching_listener(api, tls_gateway):
    """TLSRouteInvalidNoMatchingListener: a TLSRoute on an HTTP listener is not allowed (NotAllowedByListeners); on
    a sectionName that does not exist, NoMatchingParent."""
    api.cluster.apply(
        tls_route("tls-on-http", tls_gateway, gw.backend_ref("tls-app"), host="c.tls.example.com",
                  parent={"name": "tls", "sectionName": "http"}),
        tls_route("tls-no-section", tls_gateway, gw.backend_ref("tls-app"), host="d.tls.example.com",
                  parent={"name": "tls", "sectionName": "missing"}))
    route_parents(api, "TLSRoute", "tls-on-http", tls_gateway, {"Accepted": ("False", "NotAllowedByListeners"),
                                                                "ResolvedRefs": RESOLVED})
    route_parents(api, "TLSRoute", "tls-no-section", tls_gateway, {"Accepted": ("False", "NoMatchingParent"),
                                                                   "ResolvedRefs": RESOLVED})


# --- Manifests mode: traffic --------------------------------------------------------------------------------------

def infra_gateway(stage: GatewayStage, name: str, ns: str, **listener: Any) -> None:
    stage.cluster.apply(gw.gateway(name, ns=ns, listeners=[gw.listener("http", **listener)]))


def redirected_with(stage: GatewayStage, code: int) -> None:
    """A RequestRedirect's statusCode is the answer's."""
    host = f"redirect-{code}.conformance.example.com"
    infra_gateway(stage, "redirects", "conf-redirects")
    stage.cluster.apply(gw.http_route(f"redirect-{code}", ns="conf-redirects", parents=[{"name": "redirects"}],
                                      hostnames=[host], rules=[gw.rule(filters=[{
                                          "type": "RequestRedirect",
                                          "requestRedirect": {"hostname": "example.org", "statusCode": code}}])]))
    response = stage.expect_answer(host, "/x", code)["response"]
    assert response.headers["Location"] == f"http://example.org:{stage.controller.http_port}/x"


def test_httproute_303_redirect(stage):
    """HTTPRoute303Redirect: a redirect with statusCode 303."""
    redirected_with(stage, 303)


def test_httproute_307_redirect(stage):
    """HTTPRoute307Redirect: a redirect with statusCode 307."""
    redirected_with(stage, 307)


def test_httproute_308_redirect(stage):
    """HTTPRoute308Redirect: a redirect with statusCode 308."""
    redirected_with(stage, 308)


def test_httproute_named_rule(stage):
    """HTTPRouteNamedRule: rules with and without a name are both served."""
    ns, host = "conf-named", "named.conformance.example.com"
    infra_gateway(stage, "named", ns)
    stage.cluster.apply(*stage.backend("GW-CONF-NAMED", "named-app", namespace=ns))
    stage.cluster.apply(gw.http_route("named-rules", ns=ns, parents=[{"name": "named"}], hostnames=[host], rules=[
        {"name": "named-rule", **gw.rule(gw.backend_ref("named-app"), matches=[gw.path_match("/named")])},
        gw.rule(gw.backend_ref("named-app"), matches=[gw.path_match("/unnamed")])]))
    stage.expect_answer(host, "/named", "GW-CONF-NAMED")
    assert stage.answer(host, "/unnamed")["backend"] == "GW-CONF-NAMED"


def test_httproute_no_backend_refs(stage):
    """HTTPRouteNoBackendRefs (httproute-omitted-backendrefs): a rule without backendRefs, or with an empty list, answers 500."""
    ns, host = "conf-omitted", "omitted.conformance.example.com"
    infra_gateway(stage, "omitted", ns)
    stage.cluster.apply(*stage.backend("GW-CONF-OMITTED", "omitted-app", namespace=ns))
    stage.cluster.apply(gw.http_route("omitted", ns=ns, parents=[{"name": "omitted"}], hostnames=[host], rules=[
        gw.rule(gw.backend_ref("omitted-app"), matches=[gw.path_match("/forward")]),
        gw.rule(matches=[gw.path_match("/omitted-no-forward")]),
        {**gw.rule(matches=[gw.path_match("/empty-no-forward")]), "backendRefs": []}]))
    stage.expect_answer(host, "/forward", "GW-CONF-OMITTED")
    assert stage.answer(host, "/omitted-no-forward")["status"] == 500
    assert stage.answer(host, "/empty-no-forward")["status"] == 500


def test_httproute_cross_namespace(stage):
    """HTTPRouteCrossNamespace: a route of another namespace on a listener allowing all namespaces is served."""
    host = "cross-ns.conformance.example.com"
    infra_gateway(stage, "all-namespaces", "conf-cross-infra", namespaces={"from": "All"})
    stage.cluster.apply(*stage.backend("GW-CONF-WEB", "web-backend", namespace="conf-cross-web"))
    stage.cluster.apply(gw.http_route("cross-namespace", ns="conf-cross-web", hostnames=[host],
                                      parents=[{"name": "all-namespaces", "namespace": "conf-cross-infra"}],
                                      rules=[gw.rule(gw.backend_ref("web-backend"))]))
    stage.expect_answer(host, "/", "GW-CONF-WEB")


def test_httproute_matching(stage):
    """HTTPRouteMatching: a path prefix, and a header match beside another path, on two rules of a route."""
    ns, host = "conf-matching", "matching.conformance.example.com"
    infra_gateway(stage, "matching", ns)
    stage.cluster.apply(*stage.backend("GW-CONF-V1", "v1", namespace=ns),
                        *stage.backend("GW-CONF-V2", "v2", namespace=ns))
    stage.cluster.apply(gw.http_route("matching", ns=ns, parents=[{"name": "matching"}], hostnames=[host], rules=[
        gw.rule(gw.backend_ref("v1"), matches=[gw.path_match("/")]),
        gw.rule(gw.backend_ref("v2"), matches=[gw.path_match("/v2"), gw.path_match("/", headers={"version": "two"})])]))
    stage.expect_answer(host, "/", "GW-CONF-V1")
    for path, headers, want in (("/example", {}, "GW-CONF-V1"), ("/v2", {}, "GW-CONF-V2"),
                                ("/v2/example", {}, "GW-CONF-V2"), ("/", {"version": "two"}, "GW-CONF-V2")):
        answer = stage.answer(host, path, headers=headers)
        assert answer.get("backend", answer["status"]) == want, (path, headers)


def test_grpcroute_named_rule(grpc_stage):  # noqa: F811 - the fixture imported above
    """GRPCRouteNamedRule: GRPCRoute rules with and without a name are both served."""
    grpc_stage.cluster.apply(gw.grpc_route("named-rules", parents=[{"name": "grpc"}], hostnames=["grpc.example.com"],
                                           rules=[
        {"name": "named-rule", **gw.rule(gw.backend_ref("grpc-one", 50051), matches=[gw.grpc_method("named.Service")])},
        gw.rule(gw.backend_ref("grpc-two", 50051), matches=[gw.grpc_method("unnamed.Service")])]))
    wait_for(lambda: call(grpc_stage, "/named.Service/Call").get("backend") == "grpc-one", 15, what="the named rule")
    assert call(grpc_stage, "/unnamed.Service/Call")["backend"] == "grpc-two"


def test_gateway_http_listener_isolation(stage):
    """GatewayHTTPListenerIsolation: a request belongs to the most specific listener that takes its host, and only
    that listener's routes serve it."""
    ns = "conf-isolation"
    listeners = {"empty-hostname": None, "wildcard-isolation": "*.isolation.test",
                 "wildcard-foo-isolation": "*.foo.isolation.test", "abc-foo-isolation": "abc.foo.isolation.test"}
    stage.cluster.apply(*stage.backend("GW-CONF-ISOLATION", "isolation-app", namespace=ns))
    stage.cluster.apply(gw.gateway("isolation", ns=ns, listeners=[
        gw.listener(name, hostname=hostname) for name, hostname in listeners.items()]))
    stage.cluster.apply(*[gw.http_route(name, ns=ns, parents=[{"name": "isolation", "sectionName": name}], rules=[
        gw.rule(gw.backend_ref("isolation-app"), matches=[gw.path_match(f"/{name}")])]) for name in listeners])
    hosts = {"empty-hostname": "isolation-empty.test", "wildcard-isolation": "bar.isolation.test",
             "wildcard-foo-isolation": "bar.foo.isolation.test", "abc-foo-isolation": "abc.foo.isolation.test"}
    for owner, host in hosts.items():
        stage.expect_answer(host, f"/{owner}", "GW-CONF-ISOLATION")
        for other in listeners.keys() - {owner}:
            assert stage.answer(host, f"/{other}")["status"] == 404, (host, other)


def test_httproute_redirect_port_and_scheme(stage):
    """HTTPRouteRedirectPortAndScheme: a redirect's port is left out when it is the scheme's well-known one, kept
    otherwise (the cases whose Location depends on the listener's own port 80 are left out: ours is another)."""
    ns, host = "conf-port-scheme", "port-scheme.conformance.example.com"
    infra_gateway(stage, "port-scheme", ns)
    combos = {"/scheme-nil-and-port-8083": ({"port": 8083}, "http://example.org:8083"),
              "/scheme-https-and-port-nil": ({"scheme": "https"}, "https://example.org"),
              "/scheme-https-and-port-443": ({"scheme": "https", "port": 443}, "https://example.org"),
              "/scheme-https-and-port-8443": ({"scheme": "https", "port": 8443}, "https://example.org:8443"),
              "/scheme-http-and-port-80": ({"scheme": "http", "port": 80}, "http://example.org")}
    stage.cluster.apply(gw.http_route("port-scheme", ns=ns, parents=[{"name": "port-scheme"}], hostnames=[host], rules=[
        gw.rule(matches=[gw.path_match(path)], filters=[{"type": "RequestRedirect", "requestRedirect": {
            "hostname": "example.org", **spec}}]) for path, (spec, _) in combos.items()]))
    stage.expect_answer(host, "/scheme-nil-and-port-8083", 302)
    for path, (_, origin) in combos.items():
        assert stage.answer(host, path)["response"].headers["Location"] == origin + path, path
