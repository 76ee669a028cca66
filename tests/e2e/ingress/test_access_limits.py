"""Rate limits, deny lists and snippets through the whole controller, from manifests, by client address.

Clients are distinct loopback addresses (127.0.0.x); behind PROXY protocol, the address in the PROXY header.
"""
from __future__ import annotations

import http.client
import json
import socket
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
CONFIGMAP = "ingress/controller"


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


BLOCKING = dict(**{"limit-req-status-code": "429", "block-cidrs": "127.0.0.66", "block-user-agents": "~*evilbot",
                   "block-referers": "https://spam.example/", "allow-snippet-annotations": "true",
                   "annotations-risk-level": "Critical"})


@pytest.fixture(scope="module", params=[False, True], ids=["direct", "proxy-protocol"])
def stage(request, tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"),
                                                     extra_args=[f"--configmap={CONFIGMAP}"])
    proxy_protocol = request.param
    cluster.apply(configmap(**BLOCKING, **({"use-proxy-protocol": "true"} if proxy_protocol else {})))
    stage = Stage(controller, cluster, echo)
    stage.proxy_protocol = proxy_protocol
    yield stage
    controller.stop()


def get(stage: Stage, host: str, path: str = "/", *, client: str = "127.0.0.1",
        headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    """One request on its own connection from `client`: the TCP source address, or behind PROXY protocol the
    address the PROXY header names (the TCP source is then 127.0.0.1)."""
    port = stage.controller.http_port
    if stage.proxy_protocol:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(f"PROXY TCP4 {client} 127.0.0.1 40000 {port}\r\n".encode())
    else:
        sock = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(client, 0))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    conn.sock = sock
    conn.request("GET", path, headers={"Host": host, **(headers or {})})
    response = conn.getresponse()
    response.body = response.read()
    conn.close()
    return response


def serve(stage: Stage, name: str, annotations: dict[str, str]) -> str:
    """An Ingress `name` on host <name>.access.example with these annotations; waits until it answers."""
    host = f"{name}.access.example"
    stage.cluster.apply(*stage.backend("ACCESS"))
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", "access", 80))],
                                    annotations={f"{PREFIX}/{k}": v for k, v in annotations.items()}))
    wait_for(lambda: get(stage, host, client="127.0.0.250").status == 200, 15, what=f"{host} served")
    return host


def test_requests_past_the_limit_get_the_configured_status_and_allowlisted_clients_never(stage):
    # One request a minute plus a burst of one: two pass per client address, whichever worker answers.
    host = serve(stage, "limited", {"limit-rpm": "1", "limit-burst-multiplier": "1",
                                    "limit-allowlist": "127.0.0.20"})
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: get(stage, host, client="127.0.0.21").status, range(24)))
        allowed = list(pool.map(lambda _: get(stage, host, client="127.0.0.20").status, range(24)))
    assert sorted(statuses) == [200] * 2 + [429] * 22
    assert allowed == [200] * 24
    assert get(stage, host, client="127.0.0.22").status == 200  # another client has its own count


def test_denylisted_clients_get_403_on_that_ingress_only(stage):
    denied = serve(stage, "denying", {"denylist-source-range": "127.0.0.30/31",
                                      "allowlist-source-range": "127.0.0.0/8"})
    other = serve(stage, "open", {})
    assert [get(stage, denied, client=c).status for c in ("127.0.0.30", "127.0.0.31", "127.0.0.32")] == [403, 403, 200]
    assert get(stage, other, client="127.0.0.30").status == 200


def test_configmap_block_lists_refuse_on_every_host(stage):
    host = serve(stage, "blocking", {})
    assert get(stage, host, client="127.0.0.66").status == 403
    assert get(stage, "unknown.example", client="127.0.0.66").status == 403  # before routing, on any host
    assert get(stage, host, headers={"User-Agent": "Mozilla/5.0 (EvilBot 2.1)"}).status == 403
    assert get(stage, host, headers={"Referer": "https://spam.example/"}).status == 403
    assert get(stage, host, headers={"Referer": "https://spam.example/other"}).status == 200
    assert get(stage, host, headers={"User-Agent": "curl/8"}).status == 200


def test_a_configuration_snippet_applies_to_its_ingress_and_a_broken_one_rejects_only_its_own(stage):
    host = serve(stage, "snippet", {"configuration-snippet": 'add_header X-Snippet "$host" always;'})
    assert get(stage, host).headers["X-Snippet"] == host
    stage.cluster.apply(k8s.ingress("broken-snippet", [k8s.rule("broken.access.example", ("/", "Prefix", "access", 80))],
                                    annotations={f"{PREFIX}/configuration-snippet": "no_such_directive on;"}))
    later = serve(stage, "after-broken", {"limit-rps": "100"})
    assert get(stage, "broken.access.example").status == 404  # refused, never served
    assert get(stage, host).headers["X-Snippet"] == host and get(stage, later).status == 200
    log = stage.controller.log_path
    wait_for(lambda: "Ingress default/broken-snippet: " in log.read_text(errors="replace"), 10,
             what="the rejected Ingress named in the controller's log")


def test_rate_limited_backend_sees_the_client_address_that_was_counted(stage):
    host = serve(stage, "client-address", {"limit-rps": "100"})
    seen = json.loads(get(stage, host, client="127.0.0.40").body)
    assert seen["headers"]["x-real-ip"] == "127.0.0.40"
