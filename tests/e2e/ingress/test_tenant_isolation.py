"""Security first, attack 2: one tenant's annotation value must not freeze the controller for the others."""
import json
import subprocess

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

ALLOWLIST = "nginx.ingress.kubernetes.io/allowlist-source-range"


@pytest.fixture
def stage(manifests_controller, echo):
    controller, cluster = manifests_controller
    return Stage(controller, cluster, echo)


@pytest.mark.parametrize("value", ["fe80::1%$x", "fe80::1%x;y", "10.0.0.0/8, fe80::1%eth0"])
def test_an_unrenderable_access_control_value_denies_only_its_ingress(stage, value):
    suffix = str(abs(hash(value)))
    good, bad, later = (f"{kind}-{suffix}.tenant.example" for kind in ("good", "bad", "later"))
    stage.cluster.apply(*stage.backend("TENANT"))
    stage.cluster.apply(k8s.ingress(f"good-{suffix}", [k8s.rule(good, ("/", "Prefix", "tenant", 80))]))
    stage.expect(good, "/", "TENANT")

    stage.cluster.apply(k8s.ingress(f"bad-{suffix}", [k8s.rule(bad, ("/", "Prefix", "tenant", 80))],
                                    annotations={ALLOWLIST: value}))
    # A change made afterwards by someone else is still applied, and the controller stays healthy.
    stage.cluster.apply(k8s.ingress(f"later-{suffix}", [k8s.rule(later, ("/", "Prefix", "tenant", 80))]))
    stage.expect(later, "/", "TENANT")
    assert stage.controller.health().status_code == 200
    assert stage.served_by(good, "/") == "TENANT"
    stage.expect(bad, "/", "503")  # denied, as ingress-nginx denies the location, never served open
    log = stage.controller.log_path
    wait_for(lambda: f"Ingress default/bad-{suffix}: " in log.read_text(errors="replace"),
             10, what="the denied Ingress named in the controller's log")


@pytest.fixture
def remote_client():
    """A test host in its own network namespace, joined to this one by a veth pair (198.18.0.0/30):
    `run(url)` fetches `url` from there, so the controller sees a non-loopback client."""
    ns, host_if, ns_if = "pyng-remote", "pyngrem0", "pyngrem1"
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)
    subprocess.run(["ip", "link", "del", host_if], capture_output=True)
    for command in (["ip", "netns", "add", ns],
                    ["ip", "link", "add", host_if, "type", "veth", "peer", "name", ns_if, "netns", ns],
                    ["ip", "addr", "add", "198.18.0.1/30", "dev", host_if], ["ip", "link", "set", host_if, "up"],
                    ["ip", "-n", ns, "addr", "add", "198.18.0.2/30", "dev", ns_if],
                    ["ip", "-n", ns, "link", "set", ns_if, "up"], ["ip", "-n", ns, "link", "set", "lo", "up"]):
        subprocess.run(command, check=True, capture_output=True)

    def run(url: str) -> tuple[int, str]:
        out = subprocess.run(["ip", "netns", "exec", ns, "curl", "-s", "-m", "5", "-w", "\n%{http_code}", url],
                             capture_output=True, text=True, check=True).stdout
        body, _, code = out.rpartition("\n")
        return int(code), body

    yield run
    subprocess.run(["ip", "link", "del", host_if], capture_output=True)
    subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def test_status_detail_is_for_loopback_clients_only(stage, remote_client):
    port = stage.controller.healthz_port
    code, body = remote_client(f"http://198.18.0.1:{port}/healthz")
    assert (code, json.loads(body)) == (200, {"healthy": True})
    code, body = remote_client(f"http://198.18.0.1:{port}/status")
    assert code == 403 and "loopback clients only" in body
    assert remote_client(f"http://198.18.0.1:{port}/metrics")[0] == 200  # Prometheus scrapes from outside
    local = stage.controller.health().json()
    assert local["healthy"] is True and "last_error" in local
    assert requests.get(f"http://127.0.0.1:{port}/status", timeout=5).json()["problems"] is not None


def test_status_detail_is_not_served_through_an_ingress(stage):
    # A manifests directory may hold an EndpointSlice at 127.0.0.1 (the API server refuses one): nginx's
    # request then comes from loopback too, but carries the proxy headers nginx always adds.
    port = stage.controller.healthz_port
    stage.cluster.apply(k8s.service("self"), k8s.endpoint_slice("self", ["127.0.0.1"], port),
                        k8s.ingress("self", [k8s.rule("self.tenant.example", ("/", "Prefix", "self", 80))]))
    wait_for(lambda: stage.controller.get("/healthz", "self.tenant.example").status_code == 200, 10,
             what="/healthz through the Ingress")
    assert stage.controller.get("/healthz", "self.tenant.example").json() == {"healthy": True}
    denied = stage.controller.get("/status", "self.tenant.example")
    assert denied.status_code == 403 and "problems" not in denied.text
