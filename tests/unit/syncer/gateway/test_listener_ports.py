"""Listeners on ports of their own (listeners.py): the port in nginx.conf, each match carrying it, the ports the
controller keeps for itself refused, and a TCP service's port left to the service; a listener whose port nginx does
not listen on (a TCP service's, another program's, beyond the ports of their own) not accepted in its status."""
from services.common.objects import object_key
from services.syncer.model.build import build_model
from services.syncer.model.gateway.listeners import MAX_OWN_PORTS, TCP_SERVICE_PORT
from services.syncer.model.gateway.status import store_statuses
from services.syncer.model.incremental import IncrementalModel
from tests.support.gateway_status import conditions

NOT_ACCEPTED = {"Accepted": ("False", "PortUnavailable"), "Programmed": ("False", "Invalid"),
                "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("False", "NoConflicts")}
SERVED = {"Accepted": ("True", "Accepted"), "Programmed": ("True", "Programmed"),
          "ResolvedRefs": ("True", "ResolvedRefs"), "Conflicted": ("False", "NoConflicts")}


def tcp_services(gw, port: int) -> dict:
    return gw.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tcp", "namespace": "ingress"},
                   "data": {str(port): "default/web:80"}})


def listeners_status(gw, gateway: str = "gw", **kwargs) -> dict:
    """Each listener of Gateway `gateway` by name: its conditions, attachedRoutes and the Accepted message."""
    found = store_statuses(gw.store, settings=gw.settings, **kwargs).gateways["default", gateway]
    return {item["name"]: (conditions(item), item["attachedRoutes"], item["conditions"][0]["message"])
            for item in found["listeners"]}


def test_a_listener_on_another_port_gets_it_and_its_matches_carry_it(gw):
    o = gw.objects
    gw.gateway(o.listener("http"), o.listener("own", port=8080))
    gw.route("both", hostnames=["app.example.com"], rules=[o.rule(o.backend_ref("web"))])
    gw.route("only-8080", hostnames=["app.example.com"], parents=[{"name": "gw", "port": 8080}],
             rules=[o.rule(o.backend_ref("web"), matches=[o.path_match("/port")])])
    model = gw.build()
    assert model.config.gateway_ports == ((8080, "http"),)
    layer = gw.gateway_of(model, "app.example.com")["layers"][0]
    ports = {path: [m.get("port") for m in matches] for path, matches in layer["prefix"]}
    # "/" of both listeners: one match for the controller's port, one for 8080; "/port" on 8080 only.
    assert ports == {"/port": [8080], "/": [None, 8080]}
    assert all("scheme" not in m for _, matches in layer["prefix"] for m in matches if m.get("port"))


def test_ports_the_controller_uses_are_refused_naming_the_clash(gw):
    o = gw.objects
    gw.gateway(o.listener("webhook", port=8443), o.listener("https-on-80", port=80, protocol="HTTPS",
                                                                  certificate="none"),
               o.listener("http-on-443", port=443))
    model = gw.build(validating_webhook=":8443")
    assert model.config.gateway_ports == ()
    assert gw.rejections(model) == [
        "Gateway default/gw: listener webhook: port 8443 is not available (reason PortUnavailable): it is the admission "
        "webhook's port; use another port; the listener is not served",
        "Gateway default/gw: listener https-on-80: port 80 is not available (reason PortUnavailable): it is the HTTP "
        "port; use another port; the listener is not served",
        "Gateway default/gw: listener http-on-443: port 443 is not available (reason PortUnavailable): it is the HTTPS "
        "port; use another port; the listener is not served"]


def test_http_and_https_on_one_port_across_gateways_is_a_protocol_conflict(gw):
    o = gw.objects
    gw.gateway(o.listener("plain", port=9000), name="a")
    gw.certificate("cert")
    gw.gateway(o.listener("tls", port=9000, protocol="HTTPS", certificate="cert"), name="b")
    model = gw.build()
    assert model.config.gateway_ports == ((9000, "http"),)
    assert [r for r in gw.rejections(model) if "ProtocolConflict" in r] == [
        "Gateway default/b: listener tls: port 9000 is served with HTTP for Gateway default/a listener plain "
        "(reason ProtocolConflict); use another port; the listener is not served"]


def test_a_tcp_services_port_stays_the_services(gw):
    o = gw.objects
    gw.gateway(o.listener("own", port=9100))
    gw.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tcp", "namespace": "ingress"},
            "data": {"9100": "default/web:80"}})
    model = gw.build(tcp_services_configmap="ingress/tcp")
    assert model.config.gateway_ports == ()
    assert [s.port for s in model.config.stream_servers] == [9100]
    assert "Gateway listener port 9100: a TCP service of --tcp-services-configmap listens on it" in "".join(
        gw.rejections(model))


def test_at_most_max_own_ports_ports_of_their_own(gw):
    o = gw.objects
    gw.gateway(*(o.listener(f"l{n}", port=20000 + n) for n in range(MAX_OWN_PORTS + 1)))
    model = gw.build()
    assert len(model.config.gateway_ports) == MAX_OWN_PORTS
    assert gw.rejections(model) == [
        f"Gateway default/gw: listener l{MAX_OWN_PORTS}: port {20000 + MAX_OWN_PORTS} is not available (reason "
        f"PortUnavailable): pyngress serves at most {MAX_OWN_PORTS} ports of their own, and other listeners have them; "
        "use one of their ports; the listener is not served"]


def test_a_listener_on_a_tcp_services_port_is_not_accepted_in_its_status(gw):
    o = gw.objects
    gw.gateway(o.listener("own", port=9100), o.listener("http"))
    gw.route("web", hostnames=["app.example.com"], rules=[o.rule(o.backend_ref("web"))])
    tcp_services(gw, 9100)
    gw.settings = gw.settings.replace_flags(tcp_services_configmap="ingress/tcp")
    found = listeners_status(gw)
    assert found["own"][:2] == (NOT_ACCEPTED, 0)
    assert found["own"][2] == (f"listener own: port 9100 is not available (reason PortUnavailable): {TCP_SERVICE_PORT}; "
                               "move the listener or the service to another port")
    assert found["http"][:2] == (SERVED, 1)


def test_a_tcp_services_port_and_a_listener_added_in_one_change_clash(gw):
    """Both new in one sync: the incremental model gives the port to the service, as the whole build does, and the
    listener's status says why it is not served."""
    o = gw.objects
    gw.settings = gw.settings.replace_flags(tcp_services_configmap="ingress/tcp")
    incremental = IncrementalModel(gw.settings)
    incremental.update(gw.store, None)
    added = {object_key(gw.gateway(o.listener("own", port=9100))), object_key(tcp_services(gw, 9100))}
    model = incremental.update(gw.store, added)
    assert model == build_model(gw.store, settings=gw.settings)
    assert model.config.gateway_ports == () and [s.port for s in model.config.stream_servers] == [9100]
    assert listeners_status(gw)["own"][:2] == (NOT_ACCEPTED, 0)


def test_a_listener_on_a_port_another_program_holds_is_not_accepted_in_its_status(gw):
    """The syncer learns it as it applies (nginx_apply/taken_ports.py) and gives it to the status: port → why."""
    o = gw.objects
    gw.gateway(o.listener("taken", port=9200), o.listener("free", port=9201))
    gw.route("web", hostnames=["app.example.com"], rules=[o.rule(o.backend_ref("web"))])
    found = listeners_status(gw, taken_ports={9200: "another program listens on it"})
    assert found["taken"][:2] == (NOT_ACCEPTED, 0)
    assert found["taken"][2] == ("listener taken: port 9200 is not available (reason PortUnavailable): another "
                                 "program listens on it; stop that program or move the listener to another port")
    assert found["free"][:2] == (SERVED, 1)
    assert listeners_status(gw)["taken"][:2] == (SERVED, 1)  # once free again


def test_a_listener_beyond_max_own_ports_is_not_accepted_in_its_status(gw):
    o = gw.objects
    gw.gateway(*(o.listener(f"l{n}", port=20000 + n) for n in range(MAX_OWN_PORTS + 1)))
    found = listeners_status(gw)
    assert found[f"l{MAX_OWN_PORTS}"][:2] == (NOT_ACCEPTED, 0)
    assert f"pyngress serves at most {MAX_OWN_PORTS} ports of their own" in found[f"l{MAX_OWN_PORTS}"][2]
    assert found[f"l{MAX_OWN_PORTS - 1}"][:2] == (SERVED, 0)
