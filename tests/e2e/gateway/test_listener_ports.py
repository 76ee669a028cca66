"""Gateway listeners on ports of their own (issue 36: "a listener on any other port is served"), through the whole
controller in API mode and real nginx: the conformance cases HTTPRouteListenerPortMatching and
GatewayWithAttachedRoutesWithPort8080, the port opened when its Gateway appears and closed when it goes, a port the
controller uses refused with its reason, tenants kept apart per port, and no request lost on such a port while nginx
is killed and restarted (nginx-listeners holds its socket)."""
from __future__ import annotations

import json
import socket
import threading

import pytest
import requests

from tests.e2e.gateway.test_status import gateway_status, stage  # noqa: F401
from tests.e2e.tls.pki import TestCA, https_get, served_certificate, tls_secret
from tests.support import gateway_objects as gw
from tests.support.controller import tcp_ports_listened_by
from tests.support.gateway_status import conditions, listener_status, observed
from tests.support.net import free_port, wait_for

INFRA = "port-infra"


def on_port(port: int, host: str, path: str = "/") -> dict:
    """The echo backend's JSON with "status", or {"status": code}: a request on `port` with Host `host:port`."""
    response = requests.get(f"http://127.0.0.1:{port}{path}", headers={"Host": f"{host}:{port}"}, timeout=5)
    return {**(response.json() if response.status_code == 200 else {}), "status": response.status_code}


def answered_by(port: int, host: str, path: str = "/") -> str | int:
    try:
        found = on_port(port, host, path)
    except requests.ConnectionError:
        return "refused"
    return found.get("backend", found["status"])


def expect_on_port(port: int, host: str, want: str | int, path: str = "/") -> None:
    seen: list[str | int] = []

    def answered() -> bool:
        seen.append(answered_by(port, host, path))
        return seen[-1] == want
    wait_for(answered, 20, what=f"{host}:{port}{path} → {want} (last: {seen[-1:] or 'none'})")


def held_by_nginx_listeners(served, port: int) -> bool:
    """Whether nginx-listeners holds every socket of `port` (its status record names what it holds, written once it
    holds every listener of the nginx.conf in place)."""
    record = json.loads((served.controller.run_dir / "status" / "nginx-listeners.json").read_text())
    return f"0.0.0.0:{port}" in record["listeners"]


@pytest.fixture(scope="module")
def ports() -> tuple[int, int]:
    """Two free ports standing for the conformance cases' 8080 and 8090."""
    return free_port(), free_port()


@pytest.fixture(scope="module")
def port_matching(stage, ports):  # noqa: F811
    """HTTPRouteListenerPortMatching's Gateway and routes (8080 and 8090 are `ports`), in namespace port-infra."""
    p8080, p8090 = ports

    def http(name: str, port: int, host: str) -> dict:
        return gw.listener(name, port=port, hostname=host)
    stage.cluster.apply(
        *stage.backend("PORT-V1", "infra-backend-v1", namespace=INFRA),
        *stage.backend("PORT-V2", "infra-backend-v2", namespace=INFRA),
        *stage.backend("PORT-V3", "infra-backend-v3", namespace=INFRA),
        gw.gateway("port-matching", ns=INFRA, listeners=[
            http("listener-1", 80, "foo.com"), http("listener-2", p8080, "foo.com"),
            http("listener-3", p8080, "bar.com"), http("listener-4", p8090, "foo.com"),
            http("listener-5", p8090, "bar.com")]),
        *(gw.http_route(f"backend-v{n}", ns=INFRA, parents=[{"name": "port-matching", **parent}],
                        rules=[gw.rule(gw.backend_ref(f"infra-backend-v{n}"))])
          for n, parent in ((1, {"port": 80}), (2, {"port": p8080}),
                            (3, {"port": p8090, "sectionName": "listener-4"}))))
    return stage


def test_httproute_listener_port_matching(port_matching, ports):
    served, (p8080, p8090) = port_matching, ports
    served.expect_answer("foo.com", "/", "PORT-V1")
    expect_on_port(p8080, "foo.com", "PORT-V2")
    expect_on_port(p8080, "bar.com", "PORT-V2")
    expect_on_port(p8090, "foo.com", "PORT-V3")
    assert answered_by(p8090, "bar.com") == 404
    # A route answers on its listeners' port only.
    assert answered_by(p8080, "foo.com", "/") == "PORT-V2"
    assert served.answer("bar.com", "/")["status"] == 404
    for route in ("backend-v1", "backend-v2", "backend-v3"):
        [parent] = our_parents_in(served, route)
        assert conditions(parent)["Accepted"] == ("True", "Accepted"), (route, parent)
        assert conditions(parent)["ResolvedRefs"] == ("True", "ResolvedRefs"), (route, parent)
    found = gateway_status_in(served, "port-matching")
    attached = {item["name"]: item["attachedRoutes"] for item in found["listeners"]}
    assert attached == {"listener-1": 1, "listener-2": 1, "listener-3": 1, "listener-4": 1, "listener-5": 0}
    for item in found["listeners"]:
        assert conditions(item)["Accepted"] == ("True", "Accepted") and conditions(item)["Programmed"] == (
            "True", "Programmed"), item


def our_parents_in(served, route: str) -> list[dict]:
    found: list[dict] = []

    def written() -> bool:
        obj = served.cluster.read("HTTPRoute", route, ns=INFRA)
        found[:] = [p for p in (obj.get("status") or {}).get("parents") or [] if p["controllerName"] == gw.CONTROLLER]
        return bool(found) and observed(obj, found)
    wait_for(written, 15, what=f"HTTPRoute {INFRA}/{route}'s parents")
    return found


def gateway_status_in(served, name: str, ns: str = INFRA) -> dict:
    found: dict = {}

    def written() -> bool:
        obj = served.cluster.read("Gateway", name, ns=ns)
        found.clear()
        found.update(obj.get("status") or {})
        return bool(found.get("listeners")) and observed(obj, [found, *found["listeners"]])
    wait_for(written, 15, what=f"Gateway {ns}/{name}'s status")
    return found


def test_gateway_with_attached_routes_with_port_8080(stage):  # noqa: F811
    port = free_port()
    stage.cluster.apply(*stage.backend("PORT-ATTACHED", "attached-backend"), gw.gateway(
        "two-listeners-one-route", listeners=[
            gw.listener("http-unattached", port=port, namespaces={"from": "All"}, kinds=["HTTPRoute"]),
            gw.listener("http", namespaces={"from": "All"}, kinds=["HTTPRoute"])]),
        gw.http_route("http-route-4-port-8080", parents=[{"name": "two-listeners-one-route", "sectionName": "http"}],
                      hostnames=["attached.example.com"], rules=[gw.rule(gw.backend_ref("attached-backend"))]))
    stage.expect_answer("attached.example.com", "/", "PORT-ATTACHED")
    wait_for(lambda: {item["name"]: item["attachedRoutes"] for item in gateway_status(
        stage, "two-listeners-one-route")["listeners"]} == {"http-unattached": 0, "http": 1}, 15,
        what="attachedRoutes 0 on the port's listener, 1 on http")
    for item in gateway_status(stage, "two-listeners-one-route")["listeners"]:
        assert conditions(item)["Accepted"] == ("True", "Accepted"), item
        assert conditions(item)["ResolvedRefs"] == ("True", "ResolvedRefs"), item
        assert item["supportedKinds"] == [{"group": gw.GROUP, "kind": "HTTPRoute"}], item
    # The port's listener has no route: it answers 404, the route stays on the controller's port.
    expect_on_port(port, "attached.example.com", 404)


def test_a_port_is_opened_with_its_gateway_and_closed_when_it_goes(stage):  # noqa: F811
    port = free_port()
    gateway = gw.gateway("comes-and-goes", listeners=[gw.listener("own", port=port)])
    stage.cluster.apply(*stage.backend("PORT-OWN", "own-port"), gateway,
                        gw.http_route("on-own-port", parents=[{"name": "comes-and-goes"}],
                                      hostnames=["own.example.com"], rules=[gw.rule(gw.backend_ref("own-port"))]))
    expect_on_port(port, "own.example.com", "PORT-OWN")
    # The route answers on its port only; an Ingress-less host on the controller's port has nothing.
    assert stage.answer("own.example.com", "/")["status"] == 404
    # The backend is told the port the client connected to, and a redirect without a port keeps it.
    assert on_port(port, "own.example.com")["headers"]["x-forwarded-port"] == str(port)
    stage.cluster.apply(gw.http_route("moved-on-own-port", parents=[{"name": "comes-and-goes"}],
                                      hostnames=["own.example.com"], rules=[gw.rule(
                                          matches=[gw.path_match("/old")],
                                          filters=[{"type": "RequestRedirect", "requestRedirect": {
                                              "path": {"type": "ReplaceFullPath", "replaceFullPath": "/new"},
                                              "statusCode": 302}}])]))
    wait_for(lambda: requests.get(f"http://127.0.0.1:{port}/old", headers={"Host": f"own.example.com:{port}"},
                                  allow_redirects=False, timeout=5).headers.get("location")
             == f"http://own.example.com:{port}/new", 15, what="a redirect keeping the listener's port")
    # nginx-listeners holds the new port too, from the master that bound it as it reloaded.
    wait_for(lambda: held_by_nginx_listeners(stage, port), 15, what=f"nginx-listeners holding port {port}")
    assert port in tcp_ports_listened_by([stage.controller.pid("nginx-listeners")])
    stage.cluster.delete(gateway)
    expect_on_port(port, "own.example.com", "refused")
    wait_for(lambda: port not in tcp_ports_listened_by(stage.controller.pids()), 15,
             what=f"no process of the controller listening on {port}")


def test_a_port_the_controller_uses_is_refused_with_its_reason(stage):  # noqa: F811
    taken = stage.controller.healthz_port
    stage.cluster.apply(gw.gateway("clash", listeners=[gw.listener("metrics", port=taken),
                                                       gw.listener("https-on-http", port=80, protocol="HTTPS")]))
    found = gateway_status(stage, "clash")
    for name in ("metrics", "https-on-http"):
        assert conditions(listener_status(found, name))["Accepted"] == ("False", "PortUnavailable")
    message = next(c["message"] for c in listener_status(found, "metrics")["conditions"] if c["type"] == "Accepted")
    assert "healthz port" in message, message
    # The healthz port still answers as before.
    assert stage.controller.health().status_code == 200


def test_a_tenant_cannot_take_a_host_on_a_port_whose_listener_keeps_it_out(stage):  # noqa: F811
    port = free_port()
    stage.cluster.apply(
        *stage.backend("PORT-SHOP", "port-shop", namespace="port-shop"),
        *stage.backend("PORT-TENANT", "port-tenant", namespace="port-tenant"),
        gw.gateway("shop-port", ns="port-shop", listeners=[gw.listener("shop", port=port, hostname="*.shop.example")]),
        gw.gateway("open-port", ns="port-shop", listeners=[
            gw.listener("open", port=port, hostname="open.example", namespaces={"from": "All"})]),
        gw.http_route("store", ns="port-shop", parents=[{"name": "shop-port", "namespace": "port-shop"}],
                      hostnames=["www.shop.example"], rules=[gw.rule(gw.backend_ref("port-shop"))]),
        gw.http_route("steal", ns="port-tenant", parents=[{"name": "shop-port", "namespace": "port-shop"},
                                                          {"name": "open-port", "namespace": "port-shop"}],
                      hostnames=["www.shop.example", "open.example"], rules=[gw.rule(gw.backend_ref("port-tenant"))]))
    expect_on_port(port, "www.shop.example", "PORT-SHOP")
    expect_on_port(port, "open.example", "PORT-TENANT")  # the listener that allows every namespace serves it
    for _ in range(10):
        assert answered_by(port, "www.shop.example") == "PORT-SHOP"
    assert answered_by(port, "new.shop.example") == 404


def test_no_request_on_a_port_of_its_own_is_lost_while_nginx_restarts(stage):  # noqa: F811
    port = free_port()
    stage.cluster.apply(*stage.backend("PORT-KEPT", "kept"), gw.gateway(
        "kept-port", listeners=[gw.listener("kept", port=port)]),
        gw.http_route("kept", parents=[{"name": "kept-port"}], hostnames=["kept.example.com"],
                      rules=[gw.rule(gw.backend_ref("kept"))]))
    expect_on_port(port, "kept.example.com", "PORT-KEPT")
    wait_for(lambda: held_by_nginx_listeners(stage, port), 15, what=f"nginx-listeners holding port {port}")
    assert port in tcp_ports_listened_by([stage.controller.pid("nginx-listeners")])
    answers: list[str | int] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=15) as conn:
                    conn.sendall(f"GET / HTTP/1.1\r\nHost: kept.example.com:{port}\r\nConnection: close\r\n\r\n"
                                 .encode())
                    reply = b""
                    while chunk := conn.recv(65536):
                        reply += chunk
                answers.append(int(reply.split(b" ", 2)[1]) if reply else "empty reply")
            except OSError as err:
                answers.append(repr(err))

    thread = threading.Thread(target=client)
    thread.start()
    try:
        wait_for(lambda: len(answers) > 20, 10, what="requests answered before the kill")
        killed = stage.controller.kill9("nginx")
        # The new master (supervisord starts it about a second later) inherits the port from nginx-listeners: it
        # cannot bind it itself while the holder and the killed master's workers hold it.
        wait_for(lambda: stage.controller.pid("nginx") not in (0, killed)
                 and port in tcp_ports_listened_by([stage.controller.pid("nginx")]), 30,
                 what="a new nginx master listening on the port")
        before = len(answers)
        wait_for(lambda: len(answers) > before + 20, 30, what="requests answered after the restart")
    finally:
        stop.set()
        thread.join(timeout=30)
    assert set(answers) == {200}, {a for a in answers if a != 200}


def test_a_port_another_program_listens_on_is_left_out_and_blocks_no_change(stage):  # noqa: F811
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("0.0.0.0", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        stage.cluster.apply(*stage.backend("PORT-FREE", "free-port"), gw.gateway(
            "squatted", listeners=[gw.listener("taken", port=port), gw.listener("http")]),
            gw.http_route("beside-taken", parents=[{"name": "squatted"}], hostnames=["squatted.example.com"],
                          rules=[gw.rule(gw.backend_ref("free-port"))]))
        # nginx reloads without that port: the Gateway's other listener and every later change are served.
        stage.expect_answer("squatted.example.com", "/", "PORT-FREE")
        wait_for(lambda: any(f"Gateway listener port {port}" in problem and "another program listens on it" in problem
                             for problem in stage.controller.problems()), 15, what="the taken port reported")
        assert f":{port}".encode() not in stage.controller.nginx_conf()
        stage.cluster.apply(gw.http_route("after-taken", parents=[{"name": "squatted"}],
                                          hostnames=["after.example.com"], rules=[gw.rule(gw.backend_ref("free-port"))]))
        stage.expect_answer("after.example.com", "/", "PORT-FREE")


def test_an_https_listener_on_a_port_of_its_own_serves_its_certificate_and_routes(stage, tmp_path):  # noqa: F811
    host, port, ca = "tls-port.example.com", free_port(), TestCA(tmp_path)
    stage.cluster.apply(tls_secret("tls-port", ca.issue(host)), *stage.backend("PORT-TLS", "tls-port-app"),
                        gw.gateway("tls-port", listeners=[gw.listener("https", port=port, protocol="HTTPS",
                                                                      hostname=host, certificate="tls-port")]),
                        gw.http_route("over-tls", parents=[{"name": "tls-port"}],
                                      rules=[gw.rule(gw.backend_ref("tls-port-app"))]))
    wait_for(lambda: served_certificate(port, host, [ca.cert_path]).get("commonName") == host, 20,
             what=f"the listener's certificate on port {port}")
    wait_for(lambda: b'"PORT-TLS"' in https_get(port, host, "/", [ca.cert_path]).body, 10, what="the route over TLS")
    # Not on the controller's HTTPS port, nor in plain HTTP on its own (nginx's 400 for HTTP on a TLS port).
    assert b'"PORT-TLS"' not in https_get(stage.controller.https_port, host, "/", [ca.cert_path]).body
    assert requests.get(f"http://127.0.0.1:{port}/", headers={"Host": host}, timeout=5).status_code == 400
