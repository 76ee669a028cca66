"""Security first, attack 1: nginx's configuration API must not be reachable through a tenant's Ingress,
nor on any TCP port of the node.

The attack: a Service `type: ExternalName` naming 127.0.0.1 (or localhost), and an Ingress to the port
where nginx's internal API used to listen; `/configuration/versions` then answered 200 through the load
balancer, and a POST to `/configuration/routes` re-routed every host. Two layers stop it now: the model
refuses such ExternalNames, and nginx's internal listeners are Unix sockets (no TCP port to reach). The
Services with an EndpointSlice at 127.0.0.1 below get past the first layer (a manifests directory is
trusted with loopback endpoints), so they show the second one alone.
"""
from __future__ import annotations

import asyncio
import json
import stat
import subprocess
from dataclasses import dataclass

import pytest

from services.nginxconf.paths import NginxPaths
from services.nginxconf.tables import TablePusher
from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import tcp_ports_listened_by

NAMESPACE = "tenant"
VICTIM = "victim.example.com"
PATHS = ("/configuration/versions", "/nginx_status", "/status")
# What the answer of each path above carries when it is served: the API's versions, stub_status, /status.
LEAKS = ('"routes"', "Active connections", '"generation"')
# The whole routes table, as an attacker would push it: the victim's host sent nowhere.
EVIL_ROUTES = json.dumps({"version": "evil", "data": {VICTIM: {"default": {"backend": None}}}})


@dataclass(frozen=True)
class Target:
    host: str  # of the tenant's Ingress
    service: str
    port: int


def external_name_service(name: str, external_name: str, ports: dict[str, int]) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": external_name,
                     "ports": [{"name": n, "port": p, "protocol": "TCP"} for n, p in ports.items()]}}


@pytest.fixture(scope="module")
def targets(stage: Stage) -> list[Target]:
    """A tenant's Ingress to each internal port through each way to the node itself; then the victim's
    Ingress, written last, so that once it serves every tenant Ingress has been seen."""
    controller = stage.controller
    ports = {"status": controller.status_port, "healthz": controller.healthz_port,
             "passthrough": controller.ssl_passthrough_proxy_port}
    services = [external_name_service(name, address, ports)
                for name, address in (("loopback-ip", "127.0.0.1"), ("loopback-name", "localhost"))]
    found = [Target(f"{service}-{kind}.tenant.example", service, port)
             for service in ("loopback-ip", "loopback-name") for kind, port in ports.items()]
    # The ports where nginx's API and TLS listener used to be (the healthz port is the syncer's, on TCP).
    for kind in ("status", "passthrough"):
        service = f"loopback-endpoint-{kind}"
        services += [k8s.service(service, port=ports[kind], namespace=NAMESPACE),
                     k8s.endpoint_slice(service, ["127.0.0.1"], ports[kind], namespace=NAMESPACE)]
        found.append(Target(f"{service}.tenant.example", service, ports[kind]))
    stage.cluster.apply(*services, *(
        k8s.ingress(t.host.split(".")[0], [k8s.rule(t.host, ("/", "Prefix", t.service, t.port))], namespace=NAMESPACE)
        for t in found))
    stage.cluster.apply(*stage.backend("VICTIM"))
    stage.cluster.apply(k8s.ingress("victim", [k8s.rule(VICTIM, ("/", "Prefix", "victim", 80))]))
    stage.expect(VICTIM, "/", "VICTIM")
    return found


def test_internal_endpoints_are_never_served_through_an_ingress(stage, targets):
    for target in targets:
        for path in PATHS:
            response = stage.controller.get(path, target.host)
            # 404: the Ingress was refused; 502: nothing listens there; 503: no endpoint left after DNS.
            assert response.status_code in (404, 502, 503), (target, path, response.status_code, response.text)
            assert not any(leak in response.text for leak in LEAKS), (target, path, response.text)


def test_a_post_to_the_configuration_api_through_an_ingress_changes_nothing(stage, targets):
    control = TablePusher(NginxPaths.of(stage.controller.state_dir, stage.controller.run_dir))
    before = asyncio.run(control.versions())

    for target in targets:
        response = stage.controller.request("POST", "/configuration/routes", target.host, data=EVIL_ROUTES)
        assert response.status_code in (404, 502, 503), (target, response.status_code, response.text)

    assert asyncio.run(control.versions()) == before
    assert stage.served_by(VICTIM, "/") == "VICTIM"


def test_the_controller_listens_on_tcp_only_on_the_http_https_and_healthz_ports(stage, targets):
    controller = stage.controller

    assert tcp_ports_listened_by(controller.pids()) == {controller.http_port, controller.https_port,
                                                        controller.healthz_port}


def test_nginx_s_sockets_are_in_a_directory_only_root_can_enter(stage):
    paths = NginxPaths.of(stage.controller.state_dir, stage.controller.run_dir)
    directory = paths.socket_dir.stat()
    existing = [str(path) for path in paths.sockets if path.exists()]

    assert (directory.st_uid, stat.S_IMODE(directory.st_mode)) == (0, 0o700)
    assert str(paths.config_socket) in existing
    for path in existing:
        as_nobody = subprocess.run(["/usr/bin/python3", "-c", "import socket, sys; "
                                    "socket.socket(socket.AF_UNIX).connect(sys.argv[1])", path],
                                   user="nobody", capture_output=True, text=True, timeout=30)
        assert as_nobody.returncode != 0 and "PermissionError" in as_nobody.stderr, as_nobody.stderr
