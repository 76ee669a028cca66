"""Gateway API status through the whole controller in API mode (`pyngress up --kubeconfig`, the API test server):
what the leader writes into GatewayClasses, Gateways and HTTPRoutes, as the conformance cases assert it
(gateway-invalid-*, httproute-invalid-*, *-observed-generation-bump), and that it writes once per change (each write
is logged; a write the API server finds a no-op would show in no watch, so the log is what counts them)."""
from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from tests.e2e.gateway.conftest import GatewayStage
from tests.support import gateway_objects as gw
from tests.e2e.gateway.api_stage import GROUP, api_gateway_stage
from tests.support.gateway_status import conditions, listener_status, observed
from tests.support.net import wait_for

ADDRESS = "192.0.2.10"
OTHER_CONTROLLER = "example.com/other-controller"
TIMESTAMP_RESOLUTION_SECONDS = 1.1  # lastTransitionTime is in whole seconds


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo) -> Iterator[GatewayStage]:
    with api_gateway_stage(tmp_path_factory.mktemp("gateway-status"), tmp_path_factory.mktemp("kubeconfig"), echo,
                           f"--publish-status-address={ADDRESS}", "--election-id=gateway-status") as stage:
        yield stage


def gateway_status(stage, name: str) -> dict[str, Any]:
    """The Gateway's status once pyngress has written it for its current generation."""
    found: dict[str, Any] = {}

    def written() -> bool:
        obj = stage.cluster.read("Gateway", name)
        status = obj.get("status") or {}
        found.update(status)
        return bool(status.get("listeners")) and observed(obj, [status, *status["listeners"]])
    wait_for(written, 15, what=f"Gateway {name}'s status")
    return found


def our_parents(stage, route: str, *, expect: dict[str, tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """The route's parent entries of pyngress, written for its current generation (and, with `expect`, holding
    those conditions)."""
    found: list[dict[str, Any]] = []

    def written() -> bool:
        obj = stage.cluster.read("HTTPRoute", route)
        found[:] = [p for p in (obj.get("status") or {}).get("parents") or []
                    if p["controllerName"] == gw.CONTROLLER]
        return bool(found) and observed(obj, found) and (expect is None or conditions(found[0]) == expect)
    wait_for(written, 15, what=f"HTTPRoute {route}'s parents {expect or ''} (now {found})")
    return found


def route(name: str, *backends: dict, host: str, parent: dict | None = None) -> dict:
    return gw.http_route(name, hostnames=[host], parents=[parent or {"name": "edge"}], rules=[gw.rule(*backends)])


@pytest.fixture(scope="module")
def edge(stage) -> None:
    """Gateway "edge": an HTTP listener for any host and one for *.status.example.com; routes from every namespace."""
    stage.cluster.apply(*stage.backend("GW-STATUS", "status-app"), gw.gateway("edge", listeners=[
        gw.listener("http", namespaces={"from": "All"}),
        gw.listener("wild", hostname="*.wild.example.com", namespaces={"from": "All"})]))


def test_our_gateway_class_is_accepted(stage):
    def accepted() -> bool:
        obj = stage.cluster.read("GatewayClass", "pyngress", ns=None)
        return (conditions((obj.get("status") or {})) == {"Accepted": ("True", "Accepted")}
                and observed(obj, [obj["status"]]))
    wait_for(accepted, 15, what="GatewayClass pyngress Accepted")


def test_an_accepted_gateway_is_programmed_on_the_published_address(stage, edge):
    status = gateway_status(stage, "edge")
    assert conditions(status) == {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed")}
    assert status["addresses"] == [{"type": "IPAddress", "value": ADDRESS}]
    assert conditions(listener_status(status, "http")) == {
        "Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
        "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("False", "NoConflicts")}
    assert {"group": GROUP, "kind": "HTTPRoute"} in listener_status(status, "http")["supportedKinds"]


def test_a_listener_on_a_port_not_served_is_not_accepted(stage):
    # The controller's healthz port: not one a listener can have (tests/e2e/gateway/test_listener_ports.py serves others).
    stage.cluster.apply(gw.gateway("unserved-port", listeners=[gw.listener("http", port=stage.controller.healthz_port)]))
    status = gateway_status(stage, "unserved-port")
    assert conditions(status) == {"Accepted": ("False", "ListenersNotValid"), "Programmed": ("False", "Invalid")}
    assert conditions(listener_status(status, "http"))["Accepted"] == ("False", "PortUnavailable")
    assert listener_status(status, "http")["attachedRoutes"] == 0
    # Moved to a served port: a new generation, observed by every condition (gateway_status waits for that).
    stage.cluster.apply(gw.gateway("unserved-port", listeners=[gw.listener("http", port=80)]))
    wait_for(lambda: conditions(gateway_status(stage, "unserved-port"))["Accepted"] == ("True", "Accepted"), 15,
             what="the Gateway accepted at its next generation")
    assert stage.cluster.read("Gateway", "unserved-port")["metadata"]["generation"] == 2


def test_an_attached_route_is_accepted_and_counted_on_its_listeners(stage, edge):
    stage.cluster.apply(route("counted-one", gw.backend_ref("status-app"), host="one.wild.example.com"),
                        route("counted-two", gw.backend_ref("status-app"), host="two.example.com"))
    stage.expect_answer("one.wild.example.com", "/", "GW-STATUS")
    for name in ("counted-one", "counted-two"):
        [entry] = our_parents(stage, name, expect={"Accepted": ("True", "Accepted"),
                                                   "ResolvedRefs": ("True", "ResolvedRefs")})
        assert entry["parentRef"] == {"group": GROUP, "kind": "Gateway", "name": "edge"}
    # The listener for any host takes both routes, the wildcard one the route within it (no route before these).
    wait_for(lambda: [listener_status(gateway_status(stage, "edge"), name)["attachedRoutes"]
                      for name in ("http", "wild")] == [2, 1], 15,
             what="the routes counted on each listener they attach to")


def test_a_route_to_a_missing_service_has_resolved_refs_false_and_answers_500(stage, edge):
    stage.cluster.apply(route("missing-backend", gw.backend_ref("no-such-service"), host="missing.example.com"))
    our_parents(stage, "missing-backend", expect={"Accepted": ("True", "Accepted"),
                                                  "ResolvedRefs": ("False", "BackendNotFound")})
    stage.expect_answer("missing.example.com", "/", 500)


def test_a_backend_in_another_namespace_needs_a_reference_grant(stage, edge):
    stage.cluster.apply(*stage.backend("GW-FAR", "far-app", namespace="far"))
    stage.cluster.apply(route("cross", gw.backend_ref("far-app", ns="far"), host="cross.example.com"))
    our_parents(stage, "cross", expect={"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", "RefNotPermitted")})
    stage.expect_answer("cross.example.com", "/", 500)
    stage.cluster.apply(gw.reference_grant("far-grant", ns="far", from_namespace="default"))
    our_parents(stage, "cross", expect={"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")})
    stage.expect_answer("cross.example.com", "/", "GW-FAR")


def test_a_parent_ref_to_a_missing_listener_is_no_matching_parent(stage, edge):
    stage.cluster.apply(route("no-section", gw.backend_ref("status-app"), host="no-section.example.com",
                              parent={"name": "edge", "sectionName": "missing"}))
    [entry] = our_parents(stage, "no-section", expect={"Accepted": ("False", "NoMatchingParent"),
                                                       "ResolvedRefs": ("True", "ResolvedRefs")})
    assert entry["parentRef"]["sectionName"] == "missing"
    assert stage.answer("no-section.example.com", "/")["status"] == 404


def status_writes(stage, obj: str) -> int:
    """How many status writes of `obj` ("HTTPRoute default/name") the controller has made: each is logged."""
    return stage.controller.log_path.read_text(errors="replace").count(
        f'Gateway API status updated object="{obj}"')


def test_observed_generation_follows_a_spec_change_with_one_status_write(stage, edge):
    stage.cluster.apply(route("generations", gw.backend_ref("status-app"), host="gen.example.com"))
    our_parents(stage, "generations", expect={"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")})
    before = stage.cluster.read("HTTPRoute", "generations")
    writes = status_writes(stage, "HTTPRoute default/generations")
    time.sleep(TIMESTAMP_RESOLUTION_SECONDS)  # a condition rewritten now would show another lastTransitionTime
    stage.cluster.apply(route("generations", gw.backend_ref("status-app"), host="gen2.example.com"))
    stage.expect_answer("gen2.example.com", "/", "GW-STATUS")
    [entry] = our_parents(stage, "generations")
    assert {c["observedGeneration"] for c in entry["conditions"]} == {before["metadata"]["generation"] + 1}
    # The accepted condition held: its transition time is the one it had.
    [old] = [p for p in before["status"]["parents"] if p["controllerName"] == gw.CONTROLLER]
    assert entry["conditions"][0]["lastTransitionTime"] == old["conditions"][0]["lastTransitionTime"]
    # Anything else (another route, an endpoint, the resync) writes nothing more.
    time.sleep(TIMESTAMP_RESOLUTION_SECONDS)
    stage.cluster.apply(route("bystander", gw.backend_ref("status-app"), host="bystander.example.com"))
    our_parents(stage, "bystander")
    assert status_writes(stage, "HTTPRoute default/generations") == writes + 1, "one status write for the change"


def test_other_controllers_entries_are_kept_and_ours_cleared_when_no_longer_ours(stage, edge):
    stage.cluster.apply(gw.gateway_class("other", controller=OTHER_CONTROLLER),
                        gw.gateway("theirs", class_name="other"),
                        gw.http_route("shared", hostnames=["shared.example.com"],
                                      parents=[{"name": "edge"}, {"name": "theirs"}],
                                      rules=[gw.rule(gw.backend_ref("status-app"))]))
    [ours] = our_parents(stage, "shared")
    assert ours["parentRef"]["name"] == "edge"
    obj = stage.cluster.read("HTTPRoute", "shared")
    theirs = {"parentRef": {"group": GROUP, "kind": "Gateway", "name": "theirs"}, "controllerName": OTHER_CONTROLLER,
              "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "theirs",
                              "observedGeneration": obj["metadata"]["generation"],
                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    stage.cluster.patch_status("HTTPRoute", "shared", {"status": {"parents": [*obj["status"]["parents"], theirs]}})
    stage.cluster.apply(gw.http_route("shared", hostnames=["shared.example.com"], parents=[{"name": "theirs"}],
                                      rules=[gw.rule(gw.backend_ref("status-app"))]))

    def only_theirs() -> bool:
        return (stage.cluster.read("HTTPRoute", "shared").get("status") or {}).get("parents") == [theirs]
    wait_for(only_theirs, 15, what="our entry cleared, the other controller's kept")
    assert "listeners" not in (stage.cluster.read("Gateway", "theirs").get("status") or {}), "not ours to write"


def test_a_gateway_whose_class_stops_being_ours_has_its_status_cleared(stage):
    stage.cluster.apply(gw.gateway_class("elsewhere", controller=OTHER_CONTROLLER), gw.gateway("moving"))
    gateway_status(stage, "moving")
    stage.cluster.apply(gw.gateway("moving", class_name="elsewhere"))

    def cleared() -> bool:
        status = stage.cluster.read("Gateway", "moving").get("status") or {}
        return not status.get("conditions") and not status.get("listeners") and not status.get("addresses")
    wait_for(cleared, 15, what="the status of a Gateway pyngress no longer serves cleared")
