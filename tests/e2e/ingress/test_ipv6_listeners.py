"""Dual-stack listeners through the whole controller: nginx (and the passthrough proxy) listen on [::] beside
0.0.0.0, as ingress-nginx does, unless the controller ConfigMap sets disable-ipv6; the nginx-listeners program
holds both families across master restarts and follows the ConfigMap's choice without a restart."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
from pathlib import Path
from typing import Iterator

import pytest

from services.nginxconf import processes
from services.nginxconf.paths import NginxPaths
from tests.e2e.ingress.scenarios import Stage
from tests.e2e.tls.pki import TestCA, start_tls_echo, tls_secret
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

CONFIGMAP = "default/ipv6-config"
HOST = "v6.example.com"
TLS_HOST = "v6-tls.example.com"
PASSTHROUGH_HOST = "v6-pt.example.com"
PASSTHROUGH_BACKEND_IP = "127.0.31.2"

pytestmark = pytest.mark.skipif(not socket.has_ipv6 or not Path("/proc/net/if_inet6").exists(),
                                reason="this machine has no IPv6")


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


def get(address: str, port: int, host: str, path: str = "/") -> tuple[int, str]:
    """(status, backend or body) of GET `path` with Host `host`, over plain HTTP to `address`."""
    conn = http.client.HTTPConnection(address, port, timeout=5)
    try:
        conn.request("GET", path, headers={"Host": host})
        response = conn.getresponse()
        return response.status, _backend(response.read())
    finally:
        conn.close()


def https_get(address: str, port: int, host: str, trusted: Path) -> tuple[int, str, str]:
    """(status, backend or body, certificate CN) of GET / over TLS to `address`, with `host` as SNI and Host."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.load_verify_locations(cafile=str(trusted))
    conn = http.client.HTTPSConnection(address, port, timeout=5, context=context)
    raw = socket.create_connection((address, port), timeout=5)
    conn.sock = context.wrap_socket(raw, server_hostname=host)
    try:
        subject = {key: value for rdn in conn.sock.getpeercert()["subject"] for key, value in rdn}
        conn.request("GET", "/", headers={"Host": host})
        response = conn.getresponse()
        return response.status, _backend(response.read()), subject["commonName"]
    finally:
        conn.close()


def _backend(body: bytes) -> str:
    try:
        return json.loads(body)["backend"]
    except (ValueError, KeyError, TypeError):
        return body.decode(errors="replace")[:80]


def refused(address: str, port: int) -> bool:
    try:
        socket.create_connection((address, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("ipv6-pki"))


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo, ca) -> Iterator[Stage]:
    """A controller with a ConfigMap, serving HOST (plain) and TLS_HOST (its own certificate)."""
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("ipv6-controller"),
                                                     [f"--configmap={CONFIGMAP}"])
    stage = Stage(controller, cluster, echo)
    cluster.apply(configmap(), *stage.backend("V6"), tls_secret("v6-cert", ca.issue(TLS_HOST)),
                  k8s.ingress("v6", [k8s.rule(HOST, ("/", "Prefix", "v6", 80))]),
                  k8s.ingress("v6-tls", [k8s.rule(TLS_HOST, ("/", "Prefix", "v6", 80))],
                              tls=[{"hosts": [TLS_HOST], "secretName": "v6-cert"}]))
    stage.expect(HOST, "/", "V6")
    yield stage
    controller.stop()


def test_http_over_ipv6_is_routed_as_over_ipv4(stage):
    port = stage.controller.http_port
    wait_for(lambda: get("::1", port, HOST) == (200, "V6"), 10, what=f"http://[::1]:{port} routed to V6")
    assert get("127.0.0.1", port, HOST) == get("::1", port, HOST) == (200, "V6")
    assert get("::1", port, "unknown.example.com")[0] == get("127.0.0.1", port, "unknown.example.com")[0] == 404


def test_https_over_ipv6_is_terminated_with_the_hosts_certificate(stage, ca):
    port = stage.controller.https_port
    wait_for(lambda: https_get("::1", port, TLS_HOST, ca.cert_path) == (200, "V6", TLS_HOST), 15,
             what=f"https://[::1]:{port} with SNI {TLS_HOST}")
    assert https_get("127.0.0.1", port, TLS_HOST, ca.cert_path) == (200, "V6", TLS_HOST)


def test_killed_master_keeps_both_families(stage):
    controller = stage.controller
    paths = NginxPaths.of(controller.state_dir, controller.run_dir)
    old_master = controller.pid("nginx")
    os.kill(old_master, signal.SIGKILL)
    wait_for(lambda: any(p.is_master and p.pid != old_master for p in processes.instance_processes(paths.prefix)),
             15, what="a new nginx master")
    for address in ("::1", "127.0.0.1"):
        wait_for(lambda: get(address, controller.http_port, HOST) == (200, "V6"), 15,
                 what=f"{address} served after the master restart")


def test_disable_ipv6_closes_the_ipv6_listeners_and_enabling_reopens_them(stage, ca):
    controller = stage.controller
    stage.cluster.apply(configmap(**{"disable-ipv6": "true"}))
    wait_for(lambda: refused("::1", controller.http_port) and refused("::1", controller.https_port), 15,
             what="[::1] refused with disable-ipv6")
    assert b"[::]" not in controller.nginx_conf()
    assert get("127.0.0.1", controller.http_port, HOST) == (200, "V6")
    assert https_get("127.0.0.1", controller.https_port, TLS_HOST, ca.cert_path) == (200, "V6", TLS_HOST)
    # A master started meanwhile takes the IPv4 sockets only, and IPv6 stays refused.
    old_master = controller.kill9("nginx")
    wait_for(lambda: controller.pid("nginx") not in (0, old_master) and
             get("127.0.0.1", controller.http_port, HOST) == (200, "V6"), 15, what="a new master serving")
    assert refused("::1", controller.http_port)

    stage.cluster.apply(configmap())
    wait_for(lambda: not refused("::1", controller.http_port), 15, what="[::1] listened on again")
    assert get("::1", controller.http_port, HOST) == (200, "V6")
    # The nginx-listeners program took the new sockets over: a killed master loses neither family.
    old_master = controller.kill9("nginx")
    wait_for(lambda: controller.pid("nginx") not in (0, old_master), 15, what="a new master")
    for address in ("::1", "127.0.0.1"):
        wait_for(lambda: get(address, controller.http_port, HOST) == (200, "V6"), 15,
                 what=f"{address} served after the restart")


@pytest.fixture(scope="module")
def passthrough_stage(tmp_path_factory, echo, ca) -> Iterator[Stage]:
    """A controller with --enable-ssl-passthrough: PASSTHROUGH_HOST goes to a TLS backend by SNI."""
    backend = start_tls_echo((PASSTHROUGH_BACKEND_IP, 0), ca.issue("passthrough backend", (PASSTHROUGH_HOST,)),
                             tmp_path_factory.mktemp("ipv6-tls-backend"))
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("ipv6-passthrough"),
                                                     ["--enable-ssl-passthrough", f"--configmap={CONFIGMAP}"])
    cluster.apply(configmap(), k8s.service("pt-backend", port=443),
                  k8s.endpoint_slice("pt-backend", [PASSTHROUGH_BACKEND_IP], backend.server_address[1]),
                  k8s.ingress("pt", [k8s.rule(PASSTHROUGH_HOST, ("/", "Prefix", "pt-backend", 443))],
                              annotations={"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}))
    yield Stage(controller, cluster, echo)
    controller.stop()
    backend.shutdown()
    backend.server_close()


def test_passthrough_over_ipv6_and_disable_ipv6(passthrough_stage, ca):
    controller = passthrough_stage.controller
    port = controller.https_port
    wait_for(lambda: https_get("::1", port, PASSTHROUGH_HOST, ca.cert_path)[2] == "passthrough backend", 15,
             what=f"https://[::1]:{port} passed through to the backend")
    assert https_get("127.0.0.1", port, PASSTHROUGH_HOST, ca.cert_path)[2] == "passthrough backend"

    passthrough_stage.cluster.apply(configmap(**{"disable-ipv6": "true"}))
    wait_for(lambda: refused("::1", port) and refused("::1", controller.http_port), 15,
             what="[::1] refused on both ports with disable-ipv6")
    assert https_get("127.0.0.1", port, PASSTHROUGH_HOST, ca.cert_path)[2] == "passthrough backend"

    passthrough_stage.cluster.apply(configmap())
    wait_for(lambda: not refused("::1", port), 15, what="the proxy listening on [::1] again")
    assert https_get("::1", port, PASSTHROUGH_HOST, ca.cert_path)[2] == "passthrough backend"
