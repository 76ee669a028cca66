"""GRPCRoute through the whole controller in manifests mode, with the conformance suite's cases (our manifests): a
gRPC call (an HTTP/2 POST to /package.Service/Method over TLS) reaches the backend its method or header match names,
over HTTP/2 cleartext as a gRPC server takes it, with the request headers the rule sets, and weights split calls."""
from __future__ import annotations

import socket
import subprocess
from collections import Counter

import pytest

from tests.e2e.tls.pki import TestCA, tls_secret
from tests.integration.proxy.harness import Nginx, free_port, http_temp_paths
from tests.support import gateway_objects as gw
from tests.support import k8s
from tests.support.net import wait_for, wait_until_steady

HOST = "grpc.example.com"
BACKENDS = {"grpc-one": "127.0.42.2", "grpc-two": "127.0.42.3"}


@pytest.fixture(scope="module")
def h2c_port(tmp_path_factory) -> int:
    """Two backends that speak only HTTP/2 without TLS (as gRPC servers do), one per address, answering with their
    name and what they saw: the protocol, the path and the header a rule sets."""
    directory = tmp_path_factory.mktemp("h2c")
    port = free_port()
    servers = "".join(f"""
    server {{
        listen {ip}:{port} http2;
        location / {{
            return 200 "backend={name} protocol=$server_protocol method=$request_method path=$request_uri added=$http_x_added\\n";
        }}
    }}""" for name, ip in BACKENDS.items())
    backend = Nginx(directory, f"http {{\n    access_log off;\n    {http_temp_paths(directory)}{servers}\n}}")
    for ip in BACKENDS.values():
        wait_for(lambda: socket.create_connection((ip, port), timeout=1).close() is None, 10, what=f"h2c on {ip}")
    yield port
    backend.stop()


@pytest.fixture(scope="module")
def grpc_stage(stage, h2c_port, tmp_path_factory):
    """Gateway "grpc": an HTTPS listener for HOST (its certificate from a test CA) and the two h2c Services."""
    ca = TestCA(tmp_path_factory.mktemp("grpc-pki"))
    stage.cluster.apply(tls_secret("grpc-tls", ca.issue(HOST)), gw.gateway("grpc", listeners=[
        gw.listener("https", port=443, protocol="HTTPS", hostname=HOST, certificate="grpc-tls")]))
    for name, ip in BACKENDS.items():
        stage.cluster.apply(k8s.service(name, port=50051), k8s.endpoint_slice(name, [ip], h2c_port))
    return stage


def call(stage, path: str, **headers: str) -> dict[str, str]:
    """A gRPC-shaped call with curl over HTTP/2 and TLS: the backend's answer as a dict, or {"status": code}."""
    args = ["curl", "-sk", "--http2", "-X", "POST", "--resolve", f"{HOST}:{stage.controller.https_port}:127.0.0.1",
            "-H", "Content-Type: application/grpc", "-H", "TE: trailers", "--data-binary", "", "-w", "%{http_code}"]
    for name, value in headers.items():
        args += ["-H", f"{name}: {value}"]
    out = subprocess.run([*args, f"https://{HOST}:{stage.controller.https_port}{path}"], capture_output=True, text=True,
                         timeout=10, check=True).stdout
    body, status = out[:-3], out[-3:]
    if not body.startswith("backend="):  # nginx's own answer (404, 503)
        return {"status": status}
    return {**dict(item.split("=", 1) for item in body.split()), "status": status}


def route(name: str, *rules: dict) -> dict:
    return gw.grpc_route(name, parents=[{"name": "grpc"}], hostnames=[HOST], rules=rules)


def test_exact_method_and_header_matches_reach_their_h2c_backends(grpc_stage):
    added = {"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "X-Added", "value": "yes"}]}}
    grpc_stage.cluster.apply(route(
        "matches",
        gw.rule(gw.backend_ref("grpc-one", 50051), matches=[gw.grpc_method("helloworld.Greeter", "SayHello")]),
        gw.rule(gw.backend_ref("grpc-two", 50051), matches=[gw.grpc_method("helloworld.Greeter", "SayHello",
                                                                           headers={"X-Tenant": "two"})],
                filters=[added])))
    # The gRPC profile is new: a reload, during which an old worker may still take a call and refuse the route.
    wait_until_steady(lambda: call(grpc_stage, "/helloworld.Greeter/SayHello").get("backend") == "grpc-one", 15,
                      what="the exact method match")
    answer = call(grpc_stage, "/helloworld.Greeter/SayHello")
    assert answer == {"backend": "grpc-one", "protocol": "HTTP/2.0", "method": "POST",
                      "path": "/helloworld.Greeter/SayHello", "added": "", "status": "200"}
    answer = call(grpc_stage, "/helloworld.Greeter/SayHello", **{"X-Tenant": "two"})
    assert (answer["backend"], answer["protocol"], answer["added"]) == ("grpc-two", "HTTP/2.0", "yes")
    assert call(grpc_stage, "/helloworld.Greeter/SayGoodbye")["status"] == "404"  # no method matches
    assert call(grpc_stage, "/helloworld.Greeter/SayHelloAgain")["status"] == "404"


def test_weights_split_calls_between_backends(grpc_stage):
    grpc_stage.cluster.apply(route("split", gw.rule(gw.backend_ref("grpc-one", 50051, weight=1),
                                                    gw.backend_ref("grpc-two", 50051, weight=3),
                                                    matches=[gw.grpc_method("split.Service")])))
    wait_for(lambda: call(grpc_stage, "/split.Service/Call").get("status") == "200", 15, what="the split route")
    seen = Counter(call(grpc_stage, "/split.Service/Call")["backend"] for _ in range(80))
    assert set(seen) == {"grpc-one", "grpc-two"} and seen["grpc-two"] > seen["grpc-one"], seen
