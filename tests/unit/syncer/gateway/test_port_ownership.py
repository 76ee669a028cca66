"""Ports of their own across namespaces (listeners.py): the oldest Gateway keeps a port's protocol and its place under
the cap, whatever its namespace is called, and no namespace takes every port while another one needs one.

The attack these pin: where namespace owners may create Gateways, a tenant whose namespace sorts first ("a-attacker")
declares a listener on a port another namespace's older Gateway serves, or as many ports as the cap allows, and must
not take them from it."""
from typing import Any

import pytest

from services.common.objects import object_key
from services.syncer.model.build import IngressOwners, StoreIndex, build_model
from services.syncer.model.gateway.listeners import MAX_OWN_PORTS, OWN_PORTS_PER_NAMESPACE
from services.syncer.model.gateway.status import GatewayStatuses, store_statuses
from services.syncer.model.gateway.reference_grants import ReferenceGrants
from services.syncer.model.gateway.upstream_tls import backend_client_certificate
from services.syncer.model.incremental import IncrementalModel
from services.syncer.model.tls import TlsSecrets
from tests.support.gateway_status import conditions, listener_status
from tests.unit.syncer.gateway.conftest import _pems

CA = _pems("ca.example")[0].decode()

SERVED = {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
          "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("False", "NoConflicts")}
CONFLICTED = {"Accepted": ("False", "ProtocolConflict"), "Programmed": ("False", "ProtocolConflict"),
              "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("True", "ProtocolConflict")}
NOT_ACCEPTED = {"Accepted": ("False", "PortUnavailable"), "Programmed": ("False", "Invalid"),
                "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("False", "NoConflicts")}


def gateway(gw, name: str, ns: str, *listeners: dict[str, Any], created: str) -> dict[str, Any]:
    found = gw.objects.gateway(name, ns=ns, listeners=listeners)
    found["metadata"]["creationTimestamp"] = created
    return gw.add(found)


def listeners_of(found: GatewayStatuses, ns: str, name: str) -> dict[str, tuple[dict[str, tuple[str, str]], str]]:
    """Each listener of a Gateway by name: its conditions and its Accepted message."""
    return {item["name"]: (conditions(item), item["conditions"][0]["message"])
            for item in found.gateways[ns, name]["listeners"]}


def victim_and_attacker(gw) -> None:
    """team-b's Gateway serves HTTP on 8080; a newer Gateway of a-attacker (first by name) asks HTTPS there."""
    o = gw.objects
    gateway(gw, "shop", "team-b", o.listener("web", port=8080), created="2026-01-01T00:00:00Z")
    gw.certificate("evil-tls", ns="a-attacker")
    gateway(gw, "grab", "a-attacker", o.listener("steal", port=8080, protocol="HTTPS", certificate="evil-tls"),
            created="2026-06-01T00:00:00Z")


def test_a_newer_gateway_of_a_namespace_first_by_name_cannot_take_an_older_ones_port(gw):
    victim_and_attacker(gw)
    model = gw.build()
    assert model.config.gateway_ports == ((8080, "http"),)
    assert gw.rejections(model) == [
        "Gateway a-attacker/grab: listener steal: port 8080 is served with HTTP for Gateway team-b/shop listener web "
        "(reason ProtocolConflict); use another port; the listener is not served"]
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "team-b", "shop")["web"][0] == SERVED
    assert conditions(found.gateways["team-b", "shop"])["Accepted"] == ("True", "Accepted")
    assert conditions(found.gateways["team-b", "shop"])["Programmed"] == ("True", "Programmed")
    steal = listener_status(found.gateways["a-attacker", "grab"], "steal")
    assert conditions(steal) == CONFLICTED
    assert steal["conditions"][0]["message"] == (
        "listener steal: port 8080 is served with HTTP for Gateway team-b/shop listener web (reason "
        "ProtocolConflict); use another port")


def test_the_oldest_gateway_keeps_its_port_also_when_the_newer_one_comes_in_a_later_change(gw):
    """The incremental model, given only the attacker's Gateway as changed, decides as a whole build does."""
    o = gw.objects
    incremental = IncrementalModel(gw.settings)
    gateway(gw, "shop", "team-b", o.listener("web", port=8080), created="2026-01-01T00:00:00Z")
    incremental.update(gw.store, None)
    changed = {object_key(gw.certificate("evil-tls", ns="a-attacker")),
               object_key(gateway(gw, "grab", "a-attacker", o.listener("steal", port=8080, protocol="HTTPS",
                                                                      certificate="evil-tls"),
                                  created="2026-06-01T00:00:00Z"))}
    model = incremental.update(gw.store, changed)
    assert model == build_model(gw.store, settings=gw.settings)
    assert model.config.gateway_ports == ((8080, "http"),)


def test_without_creation_timestamps_namespace_and_name_decide(gw):
    """creationTimestamp missing counts as newest (creation.py): then "namespace/name", as before."""
    o = gw.objects
    gw.gateway(o.listener("web", port=8080), name="shop", ns="team-b")
    gw.certificate("evil-tls", ns="a-attacker")
    gw.gateway(o.listener("steal", port=8080, protocol="HTTPS", certificate="evil-tls"), name="grab", ns="a-attacker")
    assert gw.build().config.gateway_ports == ((8080, "https"),)


def test_a_newer_namespace_cannot_take_the_port_cap_from_an_older_one(gw):
    """a-attacker asks for every port there is; team-b's older Gateway keeps its port, and the attacker's listener
    beyond the cap is told its namespace holds more than its share."""
    o = gw.objects
    gateway(gw, "shop", "team-b", o.listener("web", port=8080), created="2026-01-01T00:00:00Z")
    gateway(gw, "grab", "a-attacker", *(o.listener(f"p{n}", port=20000 + n) for n in range(MAX_OWN_PORTS)),
            created="2026-06-01T00:00:00Z")
    model = gw.build()
    ports = dict(model.config.gateway_ports)
    assert len(ports) == MAX_OWN_PORTS and ports[8080] == "http"
    last = MAX_OWN_PORTS - 1
    assert gw.rejections(model) == [
        f"Gateway a-attacker/grab: listener p{last}: port {20000 + last} is not available (reason PortUnavailable): "
        f"pyngress serves at most {MAX_OWN_PORTS} ports of their own and all are in use; namespace a-attacker holds "
        f"{MAX_OWN_PORTS - 1} of them, each namespace is sure of {OWN_PORTS_PER_NAMESPACE} only, and other namespaces "
        "hold the rest; free one of a-attacker's ports or use one of them; the listener is not served"]
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "team-b", "shop")["web"][0] == SERVED
    grab = listeners_of(found, "a-attacker", "grab")
    assert grab[f"p{last}"][0] == NOT_ACCEPTED
    assert f"namespace a-attacker holds {MAX_OWN_PORTS - 1} of them" in grab[f"p{last}"][1]
    assert grab[f"p{last - 1}"][0] == SERVED


def test_an_old_namespace_holding_every_port_keeps_only_its_share_for_a_newcomer(gw):
    """One namespace alone may hold all the ports; a namespace that asks later still gets one, and the old one gives
    up its newest port beyond its share."""
    o = gw.objects
    gateway(gw, "many", "team-old", *(o.listener(f"p{n}", port=20000 + n) for n in range(MAX_OWN_PORTS)),
            created="2026-01-01T00:00:00Z")
    assert len(gw.build().config.gateway_ports) == MAX_OWN_PORTS
    gateway(gw, "one", "team-x", o.listener("web", port=8080), created="2026-06-01T00:00:00Z")
    model = gw.build()
    ports = dict(model.config.gateway_ports)
    assert len(ports) == MAX_OWN_PORTS and ports[8080] == "http" and 20000 + MAX_OWN_PORTS - 1 not in ports
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "team-x", "one")["web"][0] == SERVED
    assert listeners_of(found, "team-old", "many")[f"p{MAX_OWN_PORTS - 1}"][0] == NOT_ACCEPTED


def test_namespaces_within_their_share_are_served_oldest_first_once_the_cap_is_full(gw):
    """More namespaces than the cap has shares for: each within its share, the oldest first; the newest is told the
    ports are in use (its namespace holds none beyond its share)."""
    o = gw.objects
    share = OWN_PORTS_PER_NAMESPACE
    full = MAX_OWN_PORTS // share
    for n in range(full):
        gateway(gw, "gw", f"team-{n:02}", *(o.listener(f"p{i}", port=20000 + n * share + i) for i in range(share)),
                created=f"2026-01-{n + 1:02}T00:00:00Z")
    gateway(gw, "gw", "a-late", o.listener("web", port=8080), created="2026-06-01T00:00:00Z")
    model = gw.build()
    assert len(model.config.gateway_ports) == MAX_OWN_PORTS and 8080 not in dict(model.config.gateway_ports)
    assert gw.rejections(model) == [
        f"Gateway a-late/gw: listener web: port 8080 is not available (reason PortUnavailable): pyngress serves at most "
        f"{MAX_OWN_PORTS} ports of their own, and other listeners have them; use one of their ports; the listener is "
        "not served"]


def test_a_route_on_gateways_of_two_namespaces_shows_its_backends_the_older_ones_client_certificate(gw):
    """upstream_tls.py: of a route's Gateways that have a backend client certificate, the oldest one's, not the one
    of the namespace first by name."""
    o = gw.objects
    gw.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ca", "namespace": "default"},
            "data": {"ca.crt": CA}})
    gw.service("tls", ports=(("btls", 443),))
    gw.endpoint_slice("tls", port_name="btls", port=8443)
    gw.add({"apiVersion": f"{o.GROUP}/v1", "kind": "BackendTLSPolicy",
            "metadata": {"name": "tls", "namespace": "default", "creationTimestamp": gw.timestamp()},
            "spec": {"targetRefs": [{"group": "", "kind": "Service", "name": "tls"}], "validation": {
                "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "ca"}], "hostname": "b.example"}}})
    certificates = {}
    for ns, created in (("z-old", "2026-01-01T00:00:00Z"), ("a-new", "2026-06-01T00:00:00Z")):
        gw.certificate("client", ns=ns, host=f"{ns}.example")
        found = gateway(gw, "gw", ns, o.listener(hostname="app.example.com", namespaces={"from": "All"}),
                        created=created)
        found["spec"]["tls"] = {"backend": {"clientCertificateRef": {"name": "client"}}}
        certificates[ns] = backend_client_certificate(found["spec"], namespace=ns, grants=ReferenceGrants(()),
                                                      secrets=TlsSecrets(StoreIndex.of(gw.store).secrets, None))
    gw.route("r", parents=[{"name": "gw", "namespace": "a-new"}, {"name": "gw", "namespace": "z-old"}],
             rules=[o.rule(o.backend_ref("tls", 443))])
    model = gw.build()
    [action] = gw.gateway_of(model, "app.example.com")["actions"]
    [profile] = [p for p in model.config.profiles if p.name == action["profile"]]
    assert profile.backend_tls is not None and certificates["z-old"] is not None
    assert profile.backend_tls.cert_file == certificates["z-old"].file_name


def two_tenants(gw, *, attacker_listener: dict[str, Any], attacker_route: bool = True) -> None:
    """team-b's older Gateway serves shop.example.com through its wildcard listener; a-attacker's newer Gateway has
    `attacker_listener` and, with `attacker_route`, a route for any host of it to its own Service."""
    o = gw.objects
    gw.app_service("web", ns="team-b")
    gw.app_service("evil", ns="a-attacker", address="10.0.0.66")
    gateway(gw, "shop", "team-b", o.listener("web", hostname="*.example.com"), created="2026-01-01T00:00:00Z")
    gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                        hostnames=["shop.example.com"], rules=[o.rule(o.backend_ref("web"))], created=gw.timestamp()))
    gateway(gw, "grab", "a-attacker", attacker_listener, created="2026-06-01T00:00:00Z")
    if attacker_route:
        gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                            rules=[o.rule(o.backend_ref("evil"))], created=gw.timestamp()))


def backends_of(gw, model, host: str) -> list[str]:
    return [b["backend"] for action in gw.gateway_of(model, host)["actions"] for b in action["backends"]]


def test_a_newer_gateway_of_another_namespace_cannot_take_a_host_with_a_more_specific_listener(gw):
    two_tenants(gw, attacker_listener=gw.objects.listener("web", hostname="shop.example.com"))
    model = gw.build()
    assert backends_of(gw, model, "shop.example.com") == ["team-b-web-80"]
    lost = ("host shop.example.com on port 80 belongs to Gateway team-b/shop, which claimed it first there; Gateway "
            "a-attacker/grab listener web, of another namespace, does not serve it: use another host name, or ask "
            "namespace team-b to give it up")
    assert gw.warnings(model) == [f"warning: Gateway a-attacker/grab: listener web: {lost} (reason HostnameConflict)",
                                  f"warning: HTTPRoute a-attacker/grab: {lost}"]


def test_a_newer_gateways_listener_without_routes_does_not_blank_an_older_ones_host(gw):
    two_tenants(gw, attacker_listener=gw.objects.listener("web", hostname="shop.example.com"), attacker_route=False)
    assert backends_of(gw, gw.build(), "shop.example.com") == ["team-b-web-80"]


def test_a_host_named_through_a_listener_without_hostname_changes_hands_with_its_routes(gw):
    """team-b names shop.example.com through a listener without hostname (its claim is its route's); a-attacker's
    newer Gateway has a listener for that name. Route changes alone are built incrementally: the host's Gateway is
    decided from every route tabled for it."""
    o = gw.objects
    gw.app_service("web", ns="team-b")
    gw.app_service("evil", ns="a-attacker", address="10.0.0.66")
    gateway(gw, "shop", "team-b", o.listener("web"), created="2026-01-01T00:00:00Z")
    gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                        hostnames=["shop.example.com"], rules=[o.rule(o.backend_ref("web"))],
                        created="2026-01-02T00:00:00Z"))
    gateway(gw, "grab", "a-attacker", o.listener("web", hostname="shop.example.com"),
            o.listener("other", hostname="other.test"), created="2026-06-01T00:00:00Z")
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)
    steps = [
        lambda: gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                                    hostnames=["shop.example.com", "other.test"],
                                    rules=[o.rule(o.backend_ref("evil"))], created=gw.timestamp())),
        lambda: gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                                    hostnames=["www.example.com"], rules=[o.rule(o.backend_ref("web"))],
                                    created="2026-01-02T00:00:00Z")),  # team-b gives the host up
    ]
    expected = [["team-b-web-80"], ["a-attacker-evil-80"]]
    for step, backends in zip(steps, expected):
        model = incremental.update(gw.store, {object_key(step())})
        assert model == build_model(gw.store, settings=gw.settings)
        assert backends_of(gw, model, "shop.example.com") == backends
        assert backends_of(gw, model, "other.test") == ["a-attacker-evil-80"]


def test_an_older_namespaces_wildcard_listener_keeps_every_name_under_it(gw):
    """The older Gateway's listener for "*.example.com" claims shop.example.com too, with or without a route naming
    it: a newer Gateway of another namespace cannot take that name out of it."""
    o = gw.objects
    gw.app_service("web", ns="infra")
    gw.app_service("shop", ns="shop", address="10.0.0.7")
    gateway(gw, "public", "infra", o.listener("web", hostname="*.example.com"), created="2026-01-01T00:00:00Z")
    gw.add(o.http_route("all", ns="infra", parents=[{"name": "public", "namespace": "infra"}],
                        rules=[o.rule(o.backend_ref("web"))], created=gw.timestamp()))
    gateway(gw, "own", "shop", o.listener("web", hostname="shop.example.com"), created="2026-06-01T00:00:00Z")
    gw.add(o.http_route("shop", ns="shop", parents=[{"name": "own", "namespace": "shop"}],
                        rules=[o.rule(o.backend_ref("shop"))], created=gw.timestamp()))
    model = gw.build()
    assert "shop.example.com" not in model.routes  # the wildcard's entry serves it
    assert backends_of(gw, model, "*.example.com") == ["infra-web-80"]
    lost = ("host shop.example.com on port 80 belongs to Gateway infra/public, which claimed it first there; Gateway "
            "shop/own listener web, of another namespace, does not serve it: use another host name, or ask namespace "
            "infra to give it up")
    assert gw.warnings(model) == [f"warning: Gateway shop/own: listener web: {lost} (reason HostnameConflict)",
                                  f"warning: HTTPRoute shop/shop: {lost}"]


def test_a_shared_gateways_route_keeps_its_host_from_a_newer_tenants_listener(gw):
    """team-b's route names shop.example.com on infra's shared Gateway (no hostname, every namespace allowed):
    a-attacker's newer Gateway with a listener for that name does not take it."""
    o = gw.objects
    gw.app_service("web", ns="team-b")
    gateway(gw, "public", "infra", o.listener("web", namespaces={"from": "All"}), created="2026-01-01T00:00:00Z")
    gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "public", "namespace": "infra"}],
                        hostnames=["shop.example.com"], rules=[o.rule(o.backend_ref("web"))],
                        created="2026-01-02T00:00:00Z"))
    gw.app_service("evil", ns="a-attacker", address="10.0.0.66")
    gateway(gw, "grab", "a-attacker", o.listener("web", hostname="shop.example.com"), created="2026-06-01T00:00:00Z")
    gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                        rules=[o.rule(o.backend_ref("evil"))], created="2026-06-02T00:00:00Z"))
    assert backends_of(gw, gw.build(), "shop.example.com") == ["team-b-web-80"]


def test_a_tenants_later_route_on_a_shared_gateway_cannot_take_a_name_another_namespaces_listener_has(gw):
    """The reverse: shop's Gateway for "*.shop.example" (newer than the shared one) keeps www.shop.example from a
    tenant's route on the shared Gateway, made after it, also before shop's own route names the host."""
    o = gw.objects
    gw.app_service("shop", ns="shop")
    gw.app_service("tenant", ns="tenant", address="10.0.0.66")
    gateway(gw, "public", "infra", o.listener("web", namespaces={"from": "All"}), created="2026-01-01T00:00:00Z")
    gateway(gw, "shop-gw", "shop", o.listener("web", hostname="*.shop.example"), created="2026-02-01T00:00:00Z")
    gw.add(o.http_route("steal", ns="tenant", parents=[{"name": "public", "namespace": "infra"}],
                        hostnames=["www.shop.example"], rules=[o.rule(o.backend_ref("tenant"))],
                        created="2026-03-01T00:00:00Z"))
    assert "www.shop.example" not in gw.build().routes
    gw.add(o.http_route("store", ns="shop", parents=[{"name": "shop-gw", "namespace": "shop"}],
                        hostnames=["www.shop.example"], rules=[o.rule(o.backend_ref("shop"))],
                        created="2026-04-01T00:00:00Z"))
    assert backends_of(gw, gw.build(), "www.shop.example") == ["shop-shop-80"]


def test_the_host_keeps_the_older_gateways_certificate(gw):
    o = gw.objects
    gw.app_service("web", ns="team-b")
    gw.certificate("shop-tls", ns="team-b", host="shop.example.com")
    gw.certificate("evil-tls", ns="a-attacker", host="shop.example.com")
    gateway(gw, "shop", "team-b", o.listener("tls", port=443, protocol="HTTPS", certificate="shop-tls"),
            created="2026-01-01T00:00:00Z")
    gateway(gw, "grab", "a-attacker", o.listener("tls", port=443, protocol="HTTPS", hostname="shop.example.com",
                                                 certificate="evil-tls"), created="2026-06-01T00:00:00Z")
    gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                        rules=[o.rule(o.backend_ref("web", ns="team-b"))], created=gw.timestamp(1)))  # the older route
    gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                        hostnames=["shop.example.com"], rules=[o.rule(o.backend_ref("web"))],
                        created=gw.timestamp(2)))
    model = gw.build()
    assert model.tls_secrets["shop.example.com"] == "team-b/shop-tls"
    assert backends_of(gw, model, "shop.example.com") == ["team-b-web-80"]


def passthrough_victim(gw) -> None:
    """team-b's older Gateway passes secure.example.com through (a TLSRoute), with --enable-ssl-passthrough."""
    o = gw.objects
    gw.settings = gw.settings.replace_flags(enable_ssl_passthrough=True)
    gw.app_service("web", ns="team-b")
    gateway(gw, "secure", "team-b", o.listener("tls", passthrough=True), created="2026-01-01T00:00:00Z")
    gw.add(o.tls_route("secure", o.backend_ref("web"), ns="team-b", parents=[{"name": "secure", "namespace": "team-b"}],
                       hostnames=["secure.example.com"], created=gw.timestamp()))


def https_attacker(gw, *, port: int = 443, route: bool = True) -> dict[str, Any] | None:
    """a-attacker's newer Gateway with an HTTPS listener (on `port`) and, with `route`, a route for
    secure.example.com (returned)."""
    o = gw.objects
    gw.app_service("evil", ns="a-attacker", address="10.0.0.66")
    gw.certificate("evil-tls", ns="a-attacker", host="secure.example.com")
    gateway(gw, "grab", "a-attacker", o.listener("tls", port=port, protocol="HTTPS", certificate="evil-tls"),
            created="2026-06-01T00:00:00Z")
    if not route:
        return None
    return gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                               hostnames=["secure.example.com"], rules=[o.rule(o.backend_ref("evil"))],
                               created=gw.timestamp()))


@pytest.mark.parametrize("port", [443, 8443])
def test_a_newer_https_gateway_of_another_namespace_cannot_take_an_older_ones_passthrough_host(gw, port):
    """The older TLS Gateway keeps the host's SNI, on 443 as on a port of their own of the newer Gateway (a host has
    one certificate): the proxy still passes it through, nginx has no certificate or rules for it. The attacker's
    route comes as a change alone (built incrementally)."""
    passthrough_victim(gw)
    https_attacker(gw, port=port, route=False)
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)
    route = gw.add(gw.objects.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                                         hostnames=["secure.example.com"],
                                         rules=[gw.objects.rule(gw.objects.backend_ref("evil"))],
                                         created=gw.timestamp()))
    model = incremental.update(gw.store, {object_key(route)})
    assert model == build_model(gw.store, settings=gw.settings)
    assert model.passthrough["secure.example.com"] == ["10.0.0.1:8080"]
    assert "secure.example.com" not in model.tls_secrets and "secure.example.com" not in model.routes
    assert gw.warnings(model) == [
        f"warning: HTTPRoute a-attacker/grab: host secure.example.com on port {port} belongs to Gateway "
        "team-b/secure, which claimed it first there; Gateway a-attacker/grab listener tls, of another "
        "namespace, does not serve it: use another host name, or ask namespace team-b to give it up"]


def test_a_tls_route_of_the_older_gateway_takes_its_host_back_from_a_newer_https_one(gw):
    """The newer Gateway's HTTPS route came first; the older Gateway's TLSRoute, added later (a route change alone,
    built incrementally), takes the host."""
    gw.settings = gw.settings.replace_flags(enable_ssl_passthrough=True)
    gw.app_service("web", ns="team-b")
    gateway(gw, "secure", "team-b", gw.objects.listener("tls", passthrough=True), created="2026-01-01T00:00:00Z")
    https_attacker(gw)
    incremental = IncrementalModel(gw.settings)
    assert "secure.example.com" in incremental.update(gw.store, None).tls_secrets
    route = gw.add(gw.objects.tls_route("secure", gw.objects.backend_ref("web"), ns="team-b",
                                        parents=[{"name": "secure", "namespace": "team-b"}],
                                        hostnames=["secure.example.com"], created=gw.timestamp()))
    model = incremental.update(gw.store, {object_key(route)})
    assert model == build_model(gw.store, settings=gw.settings)
    assert model.passthrough["secure.example.com"] == ["10.0.0.1:8080"]
    assert "secure.example.com" not in model.tls_secrets
    gw.store.pop(object_key(route))
    model = incremental.update(gw.store, {object_key(route)})
    assert model == build_model(gw.store, settings=gw.settings)
    assert "secure.example.com" in model.tls_secrets and "secure.example.com" not in model.passthrough


def test_within_a_namespace_an_https_listener_still_comes_before_a_tls_route(gw):
    passthrough_victim(gw)
    o = gw.objects
    gw.certificate("own-tls", ns="team-b", host="secure.example.com")
    gateway(gw, "web", "team-b", o.listener("tls", port=443, protocol="HTTPS", certificate="own-tls"),
            created="2026-06-01T00:00:00Z")
    gw.add(o.http_route("web", ns="team-b", parents=[{"name": "web", "namespace": "team-b"}],
                        hostnames=["secure.example.com"], rules=[o.rule(o.backend_ref("web"))], created=gw.timestamp()))
    model = gw.build()
    assert model.tls_secrets["secure.example.com"] == "team-b/own-tls"
    assert "secure.example.com" not in model.passthrough


# What the tenant who loses a host reads in the status (status.py): its listener for that very name Conflicted, its
# routes' parents saying which hosts are not served, and why.
LOST = {"Accepted": ("True", "Accepted"), "Programmed": ("False", "HostnameConflict"),
        "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("True", "HostnameConflict")}


def route_parent(found: GatewayStatuses, ns: str, name: str, kind: str = "HTTPRoute") -> tuple[tuple[str, str], str]:
    """A route's one parent entry: its Accepted (status, reason) and message."""
    [parent] = found.routes[kind, ns, name]
    [accepted] = [c for c in parent["conditions"] if c["type"] == "Accepted"]
    return (accepted["status"], accepted["reason"]), accepted["message"]


def test_a_newer_tenants_listener_for_an_older_namespaces_host_is_conflicted_and_its_route_not_accepted(gw):
    two_tenants(gw, attacker_listener=gw.objects.listener("web", hostname="shop.example.com"))
    found = store_statuses(gw.store, settings=gw.settings)
    grab = found.gateways["a-attacker", "grab"]
    web = listener_status(grab, "web")
    assert conditions(web) == LOST
    lost = ("host shop.example.com on port 80 belongs to Gateway team-b/shop, which claimed it first there; Gateway "
            "a-attacker/grab listener web, of another namespace, does not serve it: use another host name, or ask "
            "namespace team-b to give it up")
    [conflicted] = [c for c in web["conditions"] if c["type"] == "Conflicted"]
    assert conflicted["message"] == f"listener web: {lost} (reason HostnameConflict)"
    assert web["attachedRoutes"] == 0
    assert conditions(grab)["Programmed"] == ("False", "Invalid")
    assert route_parent(found, "a-attacker", "grab") == (
        ("False", "NoMatchingListenerHostname"),
        "not attached to Gateway a-attacker/grab: no host it names there is served (reason "
        f"NoMatchingListenerHostname): {lost}")
    assert listeners_of(found, "team-b", "shop")["web"][0] == SERVED
    assert route_parent(found, "team-b", "shop") == (("True", "Accepted"), "attached to web")


def test_the_losing_listener_is_programmed_again_once_the_owner_gives_the_host_up(gw):
    two_tenants(gw, attacker_listener=gw.objects.listener("web", hostname="shop.example.com"))
    gw.store.pop("Gateway/team-b/shop")
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "a-attacker", "grab")["web"][0] == SERVED
    assert route_parent(found, "a-attacker", "grab") == (("True", "Accepted"), "attached to web")
    assert backends_of(gw, gw.build(), "shop.example.com") == ["a-attacker-evil-80"]


def test_a_route_that_loses_some_of_its_hosts_stays_accepted_and_names_them(gw):
    """a-attacker's route on its listener without hostname names shop.example.com (team-b's wildcard listener has
    it) and a host of its own: accepted, the message says which host is not served and why."""
    o = gw.objects
    two_tenants(gw, attacker_listener=o.listener("web"), attacker_route=False)
    gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                        hostnames=["shop.example.com", "mine.test"], rules=[o.rule(o.backend_ref("evil"))],
                        created=gw.timestamp()))
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "a-attacker", "grab")["web"][0] == SERVED
    assert route_parent(found, "a-attacker", "grab") == (
        ("True", "Accepted"),
        "attached to web; host shop.example.com on port 80 belongs to Gateway team-b/shop, which claimed it first "
        "there; Gateway a-attacker/grab listener web, of another namespace, does not serve it: use another host "
        "name, or ask namespace team-b to give it up")
    assert listener_status(found.gateways["a-attacker", "grab"], "web")["attachedRoutes"] == 1
    model = gw.build()
    assert backends_of(gw, model, "mine.test") == ["a-attacker-evil-80"]
    assert backends_of(gw, model, "shop.example.com") == ["team-b-web-80"]


def test_a_wildcard_listener_that_loses_a_name_under_it_stays_programmed(gw):
    """team-b's older Gateway has shop.example.com exactly; a-attacker's newer "*.example.com" listener serves the
    other names under it: Programmed, not Conflicted; its route's status names the host it does not serve."""
    o = gw.objects
    gw.app_service("web", ns="team-b")
    gw.app_service("evil", ns="a-attacker", address="10.0.0.66")
    gateway(gw, "shop", "team-b", o.listener("web", hostname="shop.example.com"), created="2026-01-01T00:00:00Z")
    gateway(gw, "grab", "a-attacker", o.listener("web", hostname="*.example.com"), created="2026-06-01T00:00:00Z")
    gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                        hostnames=["shop.example.com", "www.example.com"], rules=[o.rule(o.backend_ref("evil"))],
                        created=gw.timestamp()))
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "a-attacker", "grab")["web"][0] == SERVED
    assert listeners_of(found, "team-b", "shop")["web"][0] == SERVED
    (accepted, message) = route_parent(found, "a-attacker", "grab")
    assert accepted == ("True", "Accepted")
    assert message.startswith("attached to web; host shop.example.com on port 80 belongs to Gateway team-b/shop")
    assert "www.example.com" not in message
    assert backends_of(gw, gw.build(), "www.example.com") == ["a-attacker-evil-80"]


def test_a_newer_https_listener_for_an_older_namespaces_passthrough_host_is_conflicted_on_any_port(gw):
    """Over TLS a host has one owner whatever the port: team-b's TLSRoute passes secure.example.com through on 443;
    a-attacker's newer HTTPS listener for that name on a port of its own serves nothing."""
    o = gw.objects
    passthrough_victim(gw)
    gw.app_service("evil", ns="a-attacker", address="10.0.0.66")
    gw.certificate("evil-tls", ns="a-attacker", host="secure.example.com")
    gateway(gw, "grab", "a-attacker", o.listener("tls", port=8443, protocol="HTTPS", certificate="evil-tls",
                                                 hostname="secure.example.com"), created="2026-06-01T00:00:00Z")
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "a-attacker", "grab")["tls"][0] == LOST
    assert "belongs to Gateway team-b/secure" in listener_status(found.gateways["a-attacker", "grab"], "tls")[
        "conditions"][3]["message"]
    assert route_parent(found, "team-b", "secure", kind="TLSRoute")[0] == ("True", "Accepted")


def test_within_one_namespace_the_more_specific_listener_of_a_newer_gateway_is_not_conflicted(gw):
    o = gw.objects
    gw.app_service("web", ns="team-b")
    gateway(gw, "shop", "team-b", o.listener("web", hostname="*.example.com"), created="2026-01-01T00:00:00Z")
    gateway(gw, "own", "team-b", o.listener("web", hostname="shop.example.com"), created="2026-06-01T00:00:00Z")
    gateway(gw, "other", "team-c", o.listener("web", hostname="other.test"), created="2026-07-01T00:00:00Z")
    found = store_statuses(gw.store, settings=gw.settings)
    assert listeners_of(found, "team-b", "own")["web"][0] == SERVED
    assert listeners_of(found, "team-c", "other")["web"][0] == SERVED


# A host an Ingress of another namespace owns: the route's status says what the model serves (tables.gateway_tables),
# with the model's owners (build.IngressOwners of its routes, as the syncer hands them to the status writer).
def ingress_and_tenant(gw, *hostnames: str) -> None:
    """team-b's Ingress has shop.example.com; a-attacker's Gateway (a listener without hostname) has a route naming
    `hostnames` to its own Service."""
    o = gw.objects
    gw.ingress_class()
    gw.app("web", ns="team-b", host="shop.example.com")
    gw.app_service("evil", ns="a-attacker", address="10.0.0.66")
    gateway(gw, "grab", "a-attacker", o.listener("web"), created="2026-06-01T00:00:00Z")
    gw.add(o.http_route("grab", ns="a-attacker", parents=[{"name": "grab", "namespace": "a-attacker"}],
                        hostnames=list(hostnames), rules=[o.rule(o.backend_ref("evil"))], created=gw.timestamp()))


INGRESS_LOST = ("host shop.example.com belongs to namespace team-b, whose Ingress names it; this route, of another "
                "namespace, does not serve it: use another host name, or ask namespace team-b to give it up")


def statuses_with_owners(gw, model) -> GatewayStatuses:
    return store_statuses(gw.store, settings=gw.settings, ingress_owners=IngressOwners(model.routes))


def test_a_route_naming_another_namespaces_ingress_host_among_others_stays_accepted_and_names_it(gw):
    ingress_and_tenant(gw, "shop.example.com", "mine.test")
    model = gw.build()
    assert model.routes["shop.example.com"].gateway is None  # the Ingress alone serves it
    assert backends_of(gw, model, "mine.test") == ["a-attacker-evil-80"]
    assert gw.warnings(model) == [f"warning: HTTPRoute a-attacker/grab: {INGRESS_LOST}"]
    found = statuses_with_owners(gw, model)
    assert route_parent(found, "a-attacker", "grab") == (("True", "Accepted"), f"attached to web; {INGRESS_LOST}")
    assert listeners_of(found, "a-attacker", "grab")["web"][0] == SERVED


def test_a_route_whose_only_host_another_namespaces_ingress_owns_is_not_accepted(gw):
    ingress_and_tenant(gw, "shop.example.com")
    model = gw.build()
    assert model.routes["shop.example.com"].gateway is None
    found = statuses_with_owners(gw, model)
    assert route_parent(found, "a-attacker", "grab") == (
        ("False", "NoMatchingListenerHostname"),
        "not attached to Gateway a-attacker/grab: no host it names there is served (reason "
        f"NoMatchingListenerHostname): {INGRESS_LOST}")
    assert listener_status(found.gateways["a-attacker", "grab"], "web")["attachedRoutes"] == 0
    # The Ingress's own namespace's route serves it (beside the Ingress's paths): accepted.
    gw.store.pop("Ingress/team-b/web")
    gw.ingress("web", ns="a-attacker", host="shop.example.com")
    model = gw.build()
    assert backends_of(gw, model, "shop.example.com") == ["a-attacker-evil-80"]
    assert route_parent(statuses_with_owners(gw, model), "a-attacker", "grab") == (
        ("True", "Accepted"), "attached to web")


def test_a_losing_listener_without_routes_is_a_problem_as_its_status_says(gw):
    """a-attacker's listener for shop.example.com has no route: its problem (the log, /status, lint) has the words of
    its status; built incrementally, it goes once team-b's route gives the host up."""
    o = gw.objects
    gw.app_service("web", ns="team-b")
    gateway(gw, "shop", "team-b", o.listener("web"), created="2026-01-01T00:00:00Z")
    gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                        hostnames=["shop.example.com"], rules=[o.rule(o.backend_ref("web"))],
                        created="2026-01-02T00:00:00Z"))
    gateway(gw, "grab", "a-attacker", o.listener("web", hostname="shop.example.com"), created="2026-06-01T00:00:00Z")
    incremental = IncrementalModel(gw.settings)
    model = incremental.update(gw.store, None)
    [conflicted] = [c for c in listener_status(store_statuses(gw.store, settings=gw.settings).gateways[
        "a-attacker", "grab"], "web")["conditions"] if c["type"] == "Conflicted"]
    assert conflicted["status"] == "True"
    assert gw.warnings(model) == [f"warning: Gateway a-attacker/grab: {conflicted['message']}"]
    assert "shop.example.com on port 80 belongs to Gateway team-b/shop" in conflicted["message"]
    changed = gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                                  hostnames=["www.example.com"], rules=[o.rule(o.backend_ref("web"))],
                                  created="2026-01-02T00:00:00Z"))
    model = incremental.update(gw.store, {object_key(changed)})
    assert model == build_model(gw.store, settings=gw.settings)
    assert gw.warnings(model) == []
    # A change that reaches no hostname of a listener keeps the problems as they were.
    gw.add(o.http_route("shop", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                        hostnames=["shop.example.com"], rules=[o.rule(o.backend_ref("web"))],
                        created="2026-01-02T00:00:00Z"))
    model = incremental.update(gw.store, {"HTTPRoute/team-b/shop"})
    other = gw.add(o.http_route("more", ns="team-b", parents=[{"name": "shop", "namespace": "team-b"}],
                                hostnames=["more.test"], rules=[o.rule(o.backend_ref("web"))], created=gw.timestamp()))
    model = incremental.update(gw.store, {object_key(other)})
    assert model == build_model(gw.store, settings=gw.settings)
    assert len(gw.warnings(model)) == 1
