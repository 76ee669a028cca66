"""The Gateway API conditions pyngress decides beyond a listener's own fields: listeners in conflict, an HTTPS listener
whose certificate does not resolve (its routes counted, its host not served), a Gateway's addresses and parameters;
and the reasons carried as a value from where the model decides them (reasons.py), never read back from a message."""
from typing import Any

import pytest

from services.syncer.model.gateway.fields import RouteRejected
from services.syncer.model.gateway.gateways import gateway_addresses
from services.syncer.model.gateway.reasons import Reason
from services.syncer.model.gateway.status import GatewayStatuses, store_statuses
from tests.support.gateway_status import conditions, listener_status

ADDRESSES = [{"ip": "192.0.2.1"}, {"hostname": "lb.example.com"}]


def served_route(gw) -> None:
    gw.route("web", hostnames=["app.example.com"], rules=[gw.objects.rule(gw.objects.backend_ref("web"))])


def statuses(gw) -> GatewayStatuses:
    return store_statuses(gw.store, settings=gw.settings, addresses=ADDRESSES)


def gateway_of(found: GatewayStatuses, name: str = "gw") -> dict[str, Any]:
    return found.gateways["default", name]


def test_two_listeners_with_one_port_and_hostname_are_both_conflicted_and_not_served(gw):
    o = gw.objects
    gw.gateway(o.listener("a", hostname="same.example.com"), o.listener("b", hostname="same.example.com"),
               o.listener("other", hostname="other.example.com"))
    gw.route("web", rules=[o.rule(o.backend_ref("web"))])
    found = statuses(gw)
    for name in ("a", "b"):
        assert conditions(listener_status(gateway_of(found), name)) == {
            "Accepted": ("False", "HostnameConflict"), "Programmed": ("False", "HostnameConflict"),
            "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("True", "HostnameConflict")}
        assert listener_status(gateway_of(found), name)["attachedRoutes"] == 0
    assert conditions(listener_status(gateway_of(found), "other"))["Conflicted"] == ("False", "NoConflicts")
    accepted = gateway_of(found)["conditions"][0]
    assert (accepted["status"], accepted["reason"]) == ("True", "ListenersNotValid")
    assert "listeners a, b are conflicted" in accepted["message"]
    model = gw.build()
    assert "same.example.com" not in model.routes  # no winner among conflicted listeners
    assert gw.gateway_of(model, "other.example.com")
    assert any("listeners a, b on port 80 have the same hostname same.example.com (reason HostnameConflict)" in p
               for p in gw.rejections(model))


def test_http_and_https_listeners_on_one_port_are_a_protocol_conflict(gw):
    o = gw.objects
    gw.certificate("app-tls")
    gw.gateway(o.listener("plain", port=443), o.listener("tls", port=443, protocol="HTTPS", certificate="app-tls"))
    found = statuses(gw)
    for name in ("plain", "tls"):
        assert conditions(listener_status(gateway_of(found), name))["Conflicted"] == ("True", "ProtocolConflict")
    assert conditions(gateway_of(found))["Accepted"] == ("False", "ListenersNotValid")  # no listener left


def test_listeners_differing_by_hostname_or_port_do_not_conflict(gw):
    o = gw.objects
    gw.certificate("app-tls")
    gw.gateway(o.listener("a"), o.listener("b", hostname="b.example.com"),
               o.listener("c", port=443, protocol="HTTPS", certificate="app-tls"))
    found = statuses(gw)
    assert {conditions(item)["Conflicted"] for item in gateway_of(found)["listeners"]} == {("False", "NoConflicts")}


def test_an_https_listener_without_its_certificate_counts_its_routes_but_serves_none(gw):
    """GatewayWithAttachedRoutes, "AttachedRoutes set even when the Gateway has unresolved refs"."""
    o = gw.objects
    gw.gateway(o.listener("tls", port=443, protocol="HTTPS", certificate="does-not-exist"))
    gw.route("web", hostnames=["app.example.com"], parents=[{"name": "gw", "sectionName": "tls"}],
             rules=[o.rule(o.backend_ref("does-not-exist"))])
    found = statuses(gw)
    listener = listener_status(gateway_of(found), "tls")
    assert listener["attachedRoutes"] == 1
    assert conditions(listener) == {"Accepted": ("True", "Accepted"), "Programmed": ("False", "Invalid"),
                                    "ResolvedRefs": ("False", "InvalidCertificateRef"),
                                    "Conflicted": ("False", "NoConflicts")}
    [parent] = found.routes["HTTPRoute", "default", "web"]
    assert conditions(parent) == {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("False", "BackendNotFound")}
    assert "app.example.com" not in gw.build().routes


def test_a_route_on_a_listener_without_its_certificate_is_accepted_and_told_its_hosts_are_not_served(gw):
    o = gw.objects
    gw.gateway(o.listener("tls", port=443, protocol="HTTPS", certificate="does-not-exist"), o.listener("http"))
    gw.route("only-tls", hostnames=["app.example.com"], parents=[{"name": "gw", "sectionName": "tls"}],
             rules=[o.rule(o.backend_ref("web"))])
    gw.route("both", hostnames=["both.example.com"], rules=[o.rule(o.backend_ref("web"))])
    found = statuses(gw)
    [only_tls] = found.routes["HTTPRoute", "default", "only-tls"]
    assert conditions(only_tls)["Accepted"] == ("True", "Accepted")  # GatewayWithAttachedRoutes
    missing = "listener tls: TLS Secret default/does-not-exist not found (reason InvalidCertificateRef)"
    assert only_tls["conditions"][0]["message"] == f"attached to tls; its hosts are not served: {missing}"
    [both] = found.routes["HTTPRoute", "default", "both"]
    assert both["conditions"][0]["message"] == f"attached to http, tls; not served on tls: {missing}"
    assert "app.example.com" not in gw.build().routes


def test_a_route_to_an_unresolved_listener_of_another_namespace_is_still_not_allowed(gw):
    o = gw.objects
    gw.gateway(o.listener("tls", port=443, protocol="HTTPS", certificate="does-not-exist"))
    gw.add(o.http_route("web", ns="tenant", parents=[{"name": "gw", "namespace": "default"}],
                        rules=[o.rule(o.backend_ref("web"))]))
    found = statuses(gw)
    [parent] = found.routes["HTTPRoute", "tenant", "web"]
    assert conditions(parent)["Accepted"] == ("False", "NotAllowedByListeners")
    assert listener_status(gateway_of(found), "tls")["attachedRoutes"] == 0


@pytest.mark.parametrize("asked, programmed, shown", [
    ([], ("True", "Programmed"), [{"type": "IPAddress", "value": "192.0.2.1"},
                                  {"type": "Hostname", "value": "lb.example.com"}]),
    ([{"value": "192.0.2.1"}], ("True", "Programmed"), [{"type": "IPAddress", "value": "192.0.2.1"}]),
    ([{"type": "IPAddress"}], ("True", "Programmed"), [{"type": "IPAddress", "value": "192.0.2.1"}]),
    ([{"type": "Hostname", "value": "LB.example.com"}], ("True", "Programmed"),
     [{"type": "Hostname", "value": "lb.example.com"}]),
    ([{"value": "192.0.2.99"}, {"value": "192.0.2.1"}], ("False", "AddressNotUsable"),
     [{"type": "IPAddress", "value": "192.0.2.1"}]),
])
def test_a_gateway_is_programmed_on_the_addresses_it_asks_for_only_when_the_controller_has_them(
        gw, asked, programmed, shown):
    o = gw.objects
    gateway = gw.gateway(o.listener("http"))
    served_route(gw)
    gateway["spec"]["addresses"] = asked
    status = gateway_of(statuses(gw))
    assert conditions(status) == {"Accepted": ("True", "Accepted"), "Programmed": programmed}
    assert status["addresses"] == shown
    assert gw.gateway_of(gw.build(), "app.example.com")  # served on the controller's addresses all the same


def test_an_address_without_a_value_the_controller_has_none_of_is_not_assigned():
    found = gateway_addresses({"spec": {"addresses": [{"type": "Hostname"}]}},
                              [{"type": "IPAddress", "value": "192.0.2.1"}])
    assert found.refusal is not None and found.refusal.reason is Reason.ADDRESS_NOT_ASSIGNED
    assert "--publish-status-address" in found.refusal.message


def test_an_address_type_pyngress_does_not_take_refuses_the_gateway(gw):
    o = gw.objects
    gateway = gw.gateway(o.listener("http"))
    served_route(gw)
    gateway["spec"]["addresses"] = [{"type": "test/fake-invalid-type", "value": "fake address"}]
    assert conditions(gateway_of(statuses(gw))) == {"Accepted": ("False", "UnsupportedAddress"),
                                                    "Programmed": ("False", "Invalid")}
    model = gw.build()
    assert "app.example.com" not in model.routes
    assert any("type 'test/fake-invalid-type' is not supported (reason UnsupportedAddress)" in p
               for p in gw.rejections(model))


def test_parameters_refuse_the_gateway_and_the_class(gw):
    o = gw.objects
    gateway = gw.gateway(o.listener("http"))
    served_route(gw)
    gateway["spec"]["infrastructure"] = {"parametersRef": {"group": "invalid.io", "kind": "InvalidParameters",
                                                           "name": "invalid"}, "labels": {"key": "value"}}
    found = statuses(gw)
    assert conditions(gateway_of(found))["Accepted"] == ("False", "InvalidParameters")
    assert conditions(listener_status(gateway_of(found), "http"))["Programmed"] == ("False", "Invalid")
    assert "app.example.com" not in gw.build().routes
    gateway["spec"]["infrastructure"] = {"labels": {"key": "value"}, "annotations": {"key": "value"}}
    assert conditions(gateway_of(statuses(gw)))["Accepted"] == ("True", "Accepted")  # labels are ignored
    gw.store["GatewayClass//pyngress"]["spec"]["parametersRef"] = {"group": "", "kind": "ConfigMap", "name": "p"}
    found = statuses(gw)
    assert conditions(found.classes["pyngress"]) == {"Accepted": ("False", "InvalidParameters")}
    assert conditions(gateway_of(found))["Accepted"] == ("False", "InvalidParameters")
    assert "app.example.com" not in gw.build().routes


def test_a_reason_is_a_value_of_the_refusal_and_the_message_still_names_it(gw):
    gw.gateway({"name": "udp", "port": 80, "protocol": "UDP"})
    found = statuses(gw)
    accepted = listener_status(gateway_of(found), "udp")["conditions"][0]
    assert (accepted["reason"], type(accepted["reason"])) == ("UnsupportedProtocol", str)
    assert "(reason UnsupportedProtocol)" in accepted["message"]
    err = RouteRejected("listener x: the words (reason PortUnavailable) are not read", reason=Reason.INVALID_KIND)
    assert err.reason is Reason.INVALID_KIND and str(err).startswith("listener x")


def test_a_listener_whose_own_port_another_gateway_serves_with_the_other_protocol_is_conflicted(gw):
    o = gw.objects
    gw.certificate("app-tls")
    gw.gateway(o.listener("plain", port=8081), name="a-first")
    gw.gateway(o.listener("secure", port=8081, protocol="HTTPS", certificate="app-tls"), name="b-second")
    found = statuses(gw)
    assert conditions(listener_status(gateway_of(found, "a-first"), "plain"))["Conflicted"] == ("False", "NoConflicts")
    secure = listener_status(gateway_of(found, "b-second"), "secure")
    assert conditions(secure)["Conflicted"] == ("True", "ProtocolConflict")
    assert conditions(secure)["Accepted"] == ("False", "ProtocolConflict")
    assert ("port 8081 is served with HTTP for Gateway default/a-first listener plain"
            in secure["conditions"][0]["message"])
