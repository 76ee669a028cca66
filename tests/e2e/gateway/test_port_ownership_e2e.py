"""Tenants' Gateways competing for one thing, through the whole controller in API mode (creationTimestamp set by the
API server) and real nginx: a newer Gateway of a namespace first by name ("a-attacker") asks for a port another
namespace's older Gateway serves, or for a host it serves, and the older one keeps serving it, the newer one's
status or problems saying why (services/syncer/model/gateway/listeners.py and tables.py; the model's cases in
tests/unit/syncer/gateway/test_port_ownership.py)."""
from __future__ import annotations

import time
from typing import Any

from tests.e2e.gateway.test_listener_ports import answered_by, expect_on_port
from tests.e2e.gateway.test_status import TIMESTAMP_RESOLUTION_SECONDS, stage  # noqa: F401
from tests.e2e.tls.pki import TestCA, tls_secret
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.gateway_status import conditions, listener_status, observed
from tests.support.net import free_port, wait_for


def gateway_status(stage, name: str, ns: str) -> dict[str, Any]:  # noqa: F811
    """The Gateway's status once pyngress has written it for its current generation."""
    found: dict[str, Any] = {}

    def written() -> bool:
        obj = stage.cluster.read("Gateway", name, ns)
        found.update(obj.get("status") or {})
        return bool(found.get("listeners")) and observed(obj, [found, *found["listeners"]])
    wait_for(written, 15, what=f"Gateway {ns}/{name}'s status")
    return found


def conflicted_listener(stage, name: str, *, ns: str, listener: str, reason: str) -> dict[str, Any]:  # noqa: F811
    """The Gateway's listener's status once pyngress has written it Conflicted for `reason`."""
    found: dict[str, Any] = {}

    def conflicted() -> bool:
        found.update(listener_status(gateway_status(stage, name, ns=ns), listener))
        return conditions(found).get("Conflicted") == ("True", reason)
    wait_for(conflicted, 20, what=f"Gateway {ns}/{name}'s listener {listener} conflicted ({reason})")
    return found


def test_a_newer_gateway_of_a_namespace_first_by_name_cannot_take_a_port(stage, tmp_path):  # noqa: F811
    port = free_port()
    stage.cluster.apply(*stage.backend("VICTIM-PORT", "victim", namespace="team-b"),
                        gw.gateway("shop", ns="team-b", listeners=[gw.listener("web", port=port)]),
                        gw.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                                      hostnames=["shop.example.com"], rules=[gw.rule(gw.backend_ref("victim"))]))
    expect_on_port(port, "shop.example.com", "VICTIM-PORT")
    time.sleep(TIMESTAMP_RESOLUTION_SECONDS)  # creationTimestamp is in whole seconds: the attacker's is later
    ca = TestCA(tmp_path)
    stage.cluster.apply(tls_secret("evil", ca.issue("shop.example.com"), namespace="a-attacker"),
                        gw.gateway("grab", ns="a-attacker", listeners=[
                            gw.listener("steal", port=port, protocol="HTTPS", certificate="evil")]))
    found = conflicted_listener(stage, "grab", ns="a-attacker", listener="steal", reason="ProtocolConflict")
    assert conditions(found)["Accepted"] == ("False", "ProtocolConflict")
    accepted = next(c for c in found["conditions"] if c["type"] == "Accepted")
    assert accepted["message"] == (f"listener steal: port {port} is served with HTTP for Gateway team-b/shop listener "
                                   "web (reason ProtocolConflict); use another port")
    victim = gateway_status(stage, "shop", ns="team-b")
    assert conditions(victim)["Accepted"] == ("True", "Accepted")
    assert conditions(victim)["Programmed"] == ("True", "Programmed")
    assert conditions(listener_status(victim, "web"))["Programmed"] == ("True", "Programmed")
    for _ in range(10):
        assert answered_by(port, "shop.example.com") == "VICTIM-PORT"


def older_wildcard_gateway(stage, *, ns: str, name: str, host: str, answer: str) -> None:  # noqa: F811
    """Namespace `ns`'s Gateway `name`, its listener the wildcard over `host`, and a route for `host` to a backend
    answering `answer`; once it answers, a wait so that a Gateway made next is newer."""
    stage.cluster.apply(*stage.backend(answer, name, namespace=ns),
                        gw.gateway(name, ns=ns, listeners=[gw.listener("web", hostname="*." + host.split(".", 1)[1])]),
                        gw.http_route(name, ns=ns, parents=[{"name": name, "namespace": ns}],
                                      hostnames=[host], rules=[gw.rule(gw.backend_ref(name))]))
    stage.expect_answer(host, "/", answer)
    time.sleep(TIMESTAMP_RESOLUTION_SECONDS)  # creationTimestamp is in whole seconds


def test_a_newer_gateway_of_another_namespace_cannot_take_a_host_with_a_listener_for_it(stage):  # noqa: F811
    older_wildcard_gateway(stage, ns="team-c", name="site", host="www.site.example", answer="VICTIM-HOST")
    stage.cluster.apply(*stage.backend("ATTACKER", "evil", namespace="a-attacker"),
                        gw.gateway("grab-host", ns="a-attacker", listeners=[
                            gw.listener("web", hostname="www.site.example")]),
                        gw.http_route("grab-host", ns="a-attacker",
                                      parents=[{"name": "grab-host", "namespace": "a-attacker"}],
                                      rules=[gw.rule(gw.backend_ref("evil"))]),
                        gw.http_route("marker", ns="a-attacker",
                                      parents=[{"name": "grab-host", "namespace": "a-attacker"}],
                                      hostnames=["www.site.example", "marker.example"],
                                      rules=[gw.rule(gw.backend_ref("evil"))]))
    wait_for(lambda: any("a-attacker/grab-host: host www.site.example on port 80 belongs to Gateway team-c/site"
                         in problem for problem in stage.controller.problems()), 20,
             what="the attacker's route warned")
    for _ in range(10):
        assert stage.answer("www.site.example", "/")["backend"] == "VICTIM-HOST"


def test_the_tenant_whose_listener_lost_its_host_reads_why_in_the_status(stage):  # noqa: F811
    """A newer Gateway's listener for a name another namespace's older Gateway serves: the tenant reads it through the
    API, the listener Conflicted (HostnameConflict) and not Programmed, its route not Accepted."""
    older_wildcard_gateway(stage, ns="team-e", name="store", host="www.store.example", answer="STORE")
    stage.cluster.apply(*stage.backend("TAKER", "taker", namespace="a-taker"),
                        gw.gateway("take", ns="a-taker", listeners=[gw.listener("web", hostname="www.store.example")]),
                        gw.http_route("take", ns="a-taker", parents=[{"name": "take", "namespace": "a-taker"}],
                                      rules=[gw.rule(gw.backend_ref("taker"))]))
    lost = ("host www.store.example on port 80 belongs to Gateway team-e/store, which claimed it first there; Gateway "
            "a-taker/take listener web, of another namespace, does not serve it: use another host name, or ask "
            "namespace team-e to give it up")
    found = conflicted_listener(stage, "take", ns="a-taker", listener="web", reason="HostnameConflict")
    assert conditions(found)["Programmed"] == ("False", "HostnameConflict")
    assert conditions(found)["Accepted"] == ("True", "Accepted")
    assert found["attachedRoutes"] == 0
    [message] = [c["message"] for c in found["conditions"] if c["type"] == "Conflicted"]
    assert message == f"listener web: {lost} (reason HostnameConflict)"
    parents: list = []

    def refused() -> bool:
        route = stage.cluster.read("HTTPRoute", "take", "a-taker")
        parents[:] = [p for p in (route.get("status") or {}).get("parents") or []
                      if p["controllerName"] == gw.CONTROLLER]
        return bool(parents) and observed(route, parents) and conditions(parents[0])["Accepted"][0] == "False"
    wait_for(refused, 20, what=f"the newer Gateway's route not accepted (now {parents})")
    assert conditions(parents[0])["Accepted"] == ("False", "NoMatchingListenerHostname")
    [accepted] = [c for c in parents[0]["conditions"] if c["type"] == "Accepted"]
    assert accepted["message"] == ("not attached to Gateway a-taker/take: no host it names there is served (reason "
                                   f"NoMatchingListenerHostname): {lost}")
    for _ in range(10):
        assert stage.answer("www.store.example", "/")["backend"] == "STORE"


def route_accepted(stage, name: str, *, ns: str, status: str) -> dict[str, Any]:  # noqa: F811
    """The route's Accepted condition on our Gateway once pyngress has written it with `status`."""
    found: list[dict[str, Any]] = []

    def written() -> bool:
        route = stage.cluster.read("HTTPRoute", name, ns)
        parents = [p for p in (route.get("status") or {}).get("parents") or [] if p["controllerName"] == gw.CONTROLLER]
        found[:] = [c for p in parents for c in p["conditions"] if c["type"] == "Accepted"]
        return bool(parents) and observed(route, parents) and found[0]["status"] == status
    wait_for(written, 20, what=f"HTTPRoute {ns}/{name} Accepted {status} (now {found})")
    return found[0]


def test_a_tenants_route_for_a_host_another_namespaces_ingress_owns_reads_why_in_its_status(stage):  # noqa: F811
    """team-f's Ingress owns www.owned.example; a-tenant's routes naming it read through the API that they do not
    serve it (the one naming another host too stays Accepted), while the Ingress keeps answering."""
    stage.cluster.apply(k8s.ingress_class(), *stage.backend("OWNER", "owner", namespace="team-f"),
                        k8s.ingress("owner", [k8s.rule("www.owned.example", ("/", "Prefix", "owner", 80))],
                                    namespace="team-f"))
    stage.expect_answer("www.owned.example", "/", "OWNER")
    parents = [{"name": "tenant", "namespace": "a-tenant"}]
    stage.cluster.apply(*stage.backend("TENANT", "tenant", namespace="a-tenant"),
                        gw.gateway("tenant", ns="a-tenant", listeners=[gw.listener("web")]),
                        gw.http_route("tenant", ns="a-tenant", parents=parents,
                                      hostnames=["www.owned.example", "mine.tenant.example"],
                                      rules=[gw.rule(gw.backend_ref("tenant"))]),
                        gw.http_route("tenant-only", ns="a-tenant", parents=parents, hostnames=["www.owned.example"],
                                      rules=[gw.rule(gw.backend_ref("tenant"))]))
    stage.expect_answer("mine.tenant.example", "/", "TENANT")
    lost = ("host www.owned.example belongs to namespace team-f, whose Ingress names it; this route, of another "
            "namespace, does not serve it: use another host name, or ask namespace team-f to give it up")
    some = route_accepted(stage, "tenant", ns="a-tenant", status="True")
    assert (some["reason"], some["message"]) == ("Accepted", f"attached to web; {lost}")
    none = route_accepted(stage, "tenant-only", ns="a-tenant", status="False")
    assert (none["reason"], none["message"]) == (
        "NoMatchingListenerHostname", "not attached to Gateway a-tenant/tenant: no host it names there is served "
        f"(reason NoMatchingListenerHostname): {lost}")
    for _ in range(10):
        assert stage.answer("www.owned.example", "/")["backend"] == "OWNER"
