"""Service types behind an HTTPRoute (the conformance case HTTPRouteServiceTypes, our manifests: headless Services,
Services without a selector whose EndpointSlices someone else writes, and an ExternalName Service, which the spec
leaves to the implementation) and filters on a GRPCRoute's backendRefs (RequestHeaderModifier and
ResponseHeaderModifier, applied to the calls the weighted pick sends to that backend), through real nginx; the
routes' status through the API test server."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
import requests

from tests.e2e.gateway.test_conformance_cases import ACCEPTED, RESOLVED, api, route_parents  # noqa: F401 - fixture
from tests.e2e.gateway.test_grpcroute import HOST as GRPC_HOST
from tests.e2e.gateway.test_grpcroute import call, grpc_stage, h2c_port  # noqa: F401 - fixtures used below
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.net import wait_for

RELOADS = "nginx_ingress_controller_success"
HOST = "service-types.example.com"
EXTERNAL_HOST = "external-name.example.com"
SERVICE_PORT = 8080  # the Services' port; the endpoints' (target) port is the echo backends'
ECHO = Path(__file__).resolve().parents[3] / "examples" / "echo_backend.py"


def service(name: str, *, headless: bool = False, selector: bool = True, ns: str = "default") -> dict:
    """A Service on SERVICE_PORT (port name first-port), headless or not, with or without a selector."""
    spec: dict = {"ports": [{"name": "first-port", "protocol": "TCP", "port": SERVICE_PORT, "targetPort": 3000}]}
    if headless:
        spec["clusterIP"] = "None"
    if selector:
        spec["selector"] = {"app": name}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns}, "spec": spec}


def slice_of(service_name: str, family: str, ips: list[str], port: int, *, ns: str = "default") -> dict:
    """An EndpointSlice of `service_name` named as the case's ("<service>-ip4", "-ip6"); no `endpoints` key at all
    when `ips` is empty, as the case creates them before it fills them in."""
    found = {**k8s.endpoint_slice(service_name, ips, port, namespace=ns, port_name="first-port",
                                  name=f"{service_name}-{family}"), "addressType": "IPv4" if family == "ip4" else "IPv6"}
    if not ips:
        del found["endpoints"]
    return found


def external_name(name: str, target: str, port: int, *, ns: str = "default") -> dict:
    """An ExternalName Service: a connection goes to `target` on the port the backendRef names, as with an Ingress."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"type": "ExternalName", "externalName": target,
                     "ports": [{"name": "first-port", "protocol": "TCP", "port": port}]}}


def service_types_route(external_port: int, ns: str = "default", parent: str = "types") -> dict:
    """The case's route: one Exact path per Service type, and ours to an ExternalName Service on `external_port`."""
    paths = ("manual-endpointslices", "headless", "headless-manual-endpointslices")
    return gw.http_route("service-types", ns=ns, parents=[{"name": parent}], hostnames=[HOST], rules=[
        *(gw.rule(gw.backend_ref(path, SERVICE_PORT), matches=[gw.path_match(f"/{path}", "Exact")]) for path in paths),
        gw.rule(gw.backend_ref("external-name", external_port), matches=[gw.path_match("/external-name", "Exact")])])


def node_address() -> str:
    """An address of this node that is not a loopback one: an ExternalName naming the node itself is refused."""
    links = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show", "scope", "global"], capture_output=True,
                                      text=True, check=True).stdout)
    found = [info["local"] for link in links for info in link.get("addr_info", ())]
    if not found:
        pytest.skip("this machine has no IPv4 address other than loopback ones for an ExternalName to name")
    return found[0]


@pytest.fixture(scope="module")
def external_echo(echo) -> Iterator[str]:
    """An echo backend "GW-EXTERNAL" on the node's own non-loopback address (the echo port): what an ExternalName
    Service names."""
    address = node_address()
    proc = subprocess.Popen([sys.executable, str(ECHO), "--name", "GW-EXTERNAL", "--host", address, "--port",
                             str(echo.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: requests.get(f"http://{address}:{echo.port}/", timeout=1).ok, 10, what="GW-EXTERNAL")
        yield address
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def types(stage):
    """Gateway "types" (one HTTP listener) and the echo backend GW-SVC."""
    stage.cluster.apply(gw.gateway("types", listeners=[gw.listener("http")]))
    stage.echo.ips.get("GW-SVC") or stage.echo.start("GW-SVC")
    return stage


def test_headless_and_manually_sliced_services_are_served_as_their_slices_say(types):
    stage, ip, port = types, types.echo.ips["GW-SVC"], types.echo.port
    # As the case: Services without a selector and slices without endpoints first, filled in afterwards.
    stage.cluster.apply(
        service("manual-endpointslices", selector=False), service("headless", headless=True),
        service("headless-manual-endpointslices", headless=True, selector=False),
        *(slice_of(name, family, [], port) for name in ("manual-endpointslices", "headless-manual-endpointslices")
          for family in ("ip4", "ip6")),
        # What the EndpointSlice controller writes for the headless Service with a selector.
        k8s.endpoint_slice("headless", [ip], port, port_name="first-port", name="headless-x7k2p"),
        service_types_route(port))
    stage.expect_answer(HOST, "/headless", "GW-SVC", timeout=20)
    assert stage.answer(HOST, "/manual-endpointslices")["status"] == 503  # no endpoint yet
    reloads = stage.controller.settled_reloads()

    stage.cluster.apply(*(slice_of(name, "ip4", [ip], port)
                          for name in ("manual-endpointslices", "headless-manual-endpointslices")))
    for path in ("/manual-endpointslices", "/headless-manual-endpointslices", "/headless"):
        answer = stage.expect_answer(HOST, path, "GW-SVC")
        assert answer["path"] == path
    assert stage.controller.metric(RELOADS) == reloads  # endpoints are table data


def test_an_external_name_service_is_served_as_an_ingress_backend_is(types, external_echo):
    stage = types
    stage.cluster.apply(external_name("external-name", external_echo, stage.echo.port),
                        service_types_route(stage.echo.port))
    answer = stage.expect_answer(HOST, "/external-name", "GW-EXTERNAL", timeout=20)
    assert answer["headers"]["host"] == HOST
    # Names that reach the node itself are refused, as for an Ingress: that backend's share answers 500.
    stage.cluster.apply(external_name("to-localhost", "localhost", stage.echo.port), gw.http_route(
        "to-localhost", parents=[{"name": "types"}], hostnames=[EXTERNAL_HOST],
        rules=[gw.rule(gw.backend_ref("to-localhost", stage.echo.port))]))
    stage.expect_answer(EXTERNAL_HOST, "/", 500)
    assert any("HTTPRoute default/to-localhost" in p and "names the node itself" in p
               for p in stage.controller.problems())
    # A name is resolved when the tables are pushed: one that does not resolve leaves the backend no endpoint.
    stage.cluster.apply(external_name("to-localhost", "no-such-name.invalid", stage.echo.port))
    stage.expect_answer(EXTERNAL_HOST, "/", 503)
    assert stage.answer(HOST, "/external-name")["backend"] == "GW-EXTERNAL"


def backend_filters(backend: str) -> list[dict]:
    """The filters of a gRPC backendRef: the request header X-Added and the response header X-Picked name it."""
    return [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Added", "value": backend}]}},
            {"type": "ResponseHeaderModifier", "responseHeaderModifier": {"set": [{"name": "X-Picked",
                                                                                   "value": backend}]}}]


def grpc_filters_route(ns: str = "default", parent: str = "grpc") -> dict:
    rule_filter = {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Added",
                                                                                        "value": "rule"}]}}
    return gw.grpc_route("backend-filters", ns=ns, parents=[{"name": parent}], hostnames=[GRPC_HOST], rules=[
        gw.rule(*({**gw.backend_ref(name, 50051, weight=1), "filters": backend_filters(name)}
                  for name in ("grpc-one", "grpc-two")),
                matches=[gw.grpc_method("filters.Service", "Pick")], filters=[rule_filter]),
        gw.rule({**gw.backend_ref("grpc-one", 50051), "filters": [{"type": "RequestMirror"}]},
                matches=[gw.grpc_method("filters.Service", "Unsupported")])])


def picked_header(stage, path: str) -> tuple[str, str]:
    """One gRPC-shaped call (as test_grpcroute.call makes it): the backend that answered and the X-Picked response
    header."""
    out = subprocess.run(["curl", "-sk", "--http2", "-X", "POST", "--resolve",
                          f"{GRPC_HOST}:{stage.controller.https_port}:127.0.0.1", "-H", "Content-Type: application/grpc",
                          "-H", "TE: trailers", "--data-binary", "", "-D", "-",
                          f"https://{GRPC_HOST}:{stage.controller.https_port}{path}"],
                         capture_output=True, text=True, timeout=10, check=True).stdout
    headers, _, body = out.partition("\n\n")  # text mode: curl's CRLFs read as newlines
    picked = next((line.split(":", 1)[1].strip() for line in headers.splitlines()
                   if line.lower().startswith("x-picked:")), "")
    return body.split()[0].removeprefix("backend="), picked


def test_grpc_backend_ref_filters_apply_to_the_backend_picked(grpc_stage):  # noqa: F811 - imported fixture
    stage = grpc_stage
    stage.cluster.apply(grpc_filters_route())
    wait_for(lambda: call(stage, "/filters.Service/Pick").get("status") == "200", 20, what="the GRPCRoute")
    seen = set()
    for _ in range(40):
        answer = call(stage, "/filters.Service/Pick")
        assert answer["added"] == answer["backend"]  # the backend's own value, set after the rule's
        seen.add(answer["backend"])
    assert seen == {"grpc-one", "grpc-two"}
    for _ in range(10):
        backend, picked = picked_header(stage, "/filters.Service/Pick")
        assert picked == backend
    # Another filter on a backendRef: its share answers 500, the route's other rule still serves.
    assert call(stage, "/filters.Service/Unsupported")["status"] == "500"
    assert any("backendRefs[0].filters[0]: filter RequestMirror is not supported" in p
               for p in stage.controller.problems())


def test_routes_to_these_backends_are_accepted_with_their_references_resolved(api, external_echo):  # noqa: F811
    ns = "service-types"
    ip, port = api.echo.ips.get("GW-SVC") or api.echo.start("GW-SVC"), api.echo.port
    api.cluster.apply(
        gw.gateway("types", ns=ns, listeners=[gw.listener("http", kinds=["HTTPRoute", "GRPCRoute"])]),
        service("manual-endpointslices", selector=False, ns=ns), service("headless", headless=True, ns=ns),
        service("headless-manual-endpointslices", headless=True, selector=False, ns=ns),
        *(slice_of(name, "ip4", [ip], port, ns=ns)
          for name in ("manual-endpointslices", "headless-manual-endpointslices")),
        k8s.endpoint_slice("headless", [ip], port, namespace=ns, port_name="first-port", name="headless-x7k2p"),
        external_name("external-name", external_echo, port, ns=ns),
        *(k8s.service(name, port=50051, namespace=ns) for name in ("grpc-one", "grpc-two")),
        service_types_route(port, ns, parent="types"), grpc_filters_route(ns, parent="types"))
    expect = {"Accepted": ACCEPTED, "ResolvedRefs": RESOLVED}
    route_parents(api, "HTTPRoute", "service-types", ns, expect)
    api.cluster.apply(external_name("to-localhost", "localhost", port, ns=ns), gw.http_route(
        "to-localhost", ns=ns, parents=[{"name": "types"}], rules=[gw.rule(gw.backend_ref("to-localhost", port))]))
    [parent] = route_parents(api, "HTTPRoute", "to-localhost", ns, {"Accepted": ACCEPTED,
                                                                    "ResolvedRefs": ("False", "BackendNotFound")})
    assert "names the node itself" in next(c["message"] for c in parent["conditions"] if c["type"] == "ResolvedRefs")
    # An unsupported filter on a backendRef keeps the reference resolved (its share answers 500).
    route_parents(api, "GRPCRoute", "backend-filters", ns, expect)
