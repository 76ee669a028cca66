"""Listeners on ports of their own (listeners.py): the port in nginx.conf, each match carrying it, the ports the
controller keeps for itself refused, and a TCP service's port left to the service."""
from services.syncer.model.gateway.listeners import MAX_OWN_PORTS


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
