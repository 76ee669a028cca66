"""The controller ConfigMap's snippets (main-, http-, server-, location-, stream-snippet), the headers-more module
and server-tokens, as a client sees them through a running controller and real nginx (manifests mode).

As in ingress-nginx, the ConfigMap's snippets apply whatever allow-snippet-annotations says; one that does not stay
inside its block, or that nginx -t refuses, is reported and the rest keeps serving."""
from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import free_port, wait_for, wait_until_steady

CONFIGMAP = "ingress/controller"
HOST = "snippets.example.com"
PREFIX = "nginx.ingress.kubernetes.io"
# A map in the http block whose variable a location-snippet sends back as a header.
TIER_MAP = 'map $http_x_plan $plan_tier {\n    default "free";\n    gold "premium";\n}'
TIER_HEADER = 'more_set_headers "X-Tier: $plan_tier";'


def configmap(**data: str) -> dict:
    namespace, name = CONFIGMAP.split("/")
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace}, "data": data}


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"),
                                                     extra_args=[f"--configmap={CONFIGMAP}"])
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("SNIPPETS", "snippets"),
                  k8s.ingress("snippets", [k8s.rule(HOST, ("/", "Prefix", "snippets", 80))]))
    stage.expect(HOST, "/", "SNIPPETS")
    yield stage
    controller.stop()


def get(stage: Stage, path: str = "/", host: str = HOST, **headers: str) -> requests.Response:
    return requests.get(f"http://127.0.0.1:{stage.controller.http_port}{path}", headers={"Host": host, **headers},
                        timeout=5, allow_redirects=False)


def problems(stage: Stage) -> list[str]:
    return requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/status", timeout=5).json()["problems"]


def test_no_server_header_unless_server_tokens(stage: Stage) -> None:
    stage.cluster.apply(configmap())
    wait_for(lambda: "Server" not in get(stage).headers, 15, what="no Server header by default")
    assert "Server" not in get(stage, host="unknown.example.com").headers  # the default backend's 404 too
    stage.cluster.apply(configmap(**{"server-tokens": "true"}))
    wait_for(lambda: get(stage).headers.get("Server", "").startswith("nginx"), 15, what="Server: nginx")


def test_an_http_snippet_map_read_by_a_location_snippet_header(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"http-snippet": TIER_MAP, "location-snippet": TIER_HEADER}))
    wait_for(lambda: get(stage).headers.get("X-Tier") == "free", 15, what="the location snippet's header")
    answer = get(stage, **{"X-Plan": "gold"})
    assert answer.headers["X-Tier"] == "premium" and answer.json()["backend"] == "SNIPPETS"


def test_a_server_snippet_location_on_every_host(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"server-snippet": 'location = /fixed {\n    return 200 "fixed body";\n}'}))
    # Both at once: just after the reload, an old worker may still take a connection for a moment.
    wait_for(lambda: get(stage, "/fixed").text == "fixed body"
             and get(stage, "/fixed", host="unknown.example.com").text == "fixed body",  # the default server too
             15, what="the server snippet's location on a known and an unknown host")
    assert get(stage, "/other").json()["backend"] == "SNIPPETS"


def test_a_main_snippet(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"main-snippet": "worker_rlimit_nofile 4321;"}))

    def worker_open_files_limits() -> set[str]:
        master = stage.controller.pid("nginx")
        workers = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        return {re.search(r"Max open files\s+(\d+)", Path(f"/proc/{pid}/limits").read_text()).group(1)
                for pid in workers}
    wait_for(lambda: worker_open_files_limits() == {"4321"}, 20, what="the workers' open files limit")


def test_a_stream_snippet_server(stage: Stage) -> None:
    port = free_port()
    stage.cluster.apply(configmap(**{
        "stream-snippet": f'server {{\n    listen 127.0.0.1:{port};\n    return "stream snippet says hi";\n}}'}))

    def answer() -> bytes:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
                return conn.recv(100)
        except OSError:
            return b""
    wait_for(lambda: answer() == b"stream snippet says hi", 15, what="the stream snippet's server")
    assert get(stage).json()["backend"] == "SNIPPETS"


def test_more_set_headers_in_a_configuration_snippet(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"}),
                        *stage.backend("SNIPPETS", "headers-more"),
                        k8s.ingress("headers-more", [k8s.rule("more.example.com", ("/", "Prefix", "headers-more", 80))],
                                    annotations={f"{PREFIX}/configuration-snippet":
                                                 'more_set_headers "X-Snippet: set";\nmore_clear_headers X-Backend;'}))
    wait_until_steady(lambda: get(stage, host="more.example.com").headers.get("X-Snippet") == "set", 20,
                      what="the configuration snippet's header")
    answer = get(stage, host="more.example.com")
    assert "X-Backend" not in answer.headers and answer.json()["backend"] == "SNIPPETS"
    assert "X-Backend" in get(stage).headers  # another Ingress keeps the backend's header


def test_a_snippet_that_leaves_its_block_is_reported_and_the_previous_one_applies(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"http-snippet": TIER_MAP, "location-snippet": TIER_HEADER}))
    wait_for(lambda: get(stage).headers.get("X-Tier") == "free", 15, what="the snippets applied")
    stage.cluster.apply(configmap(**{"http-snippet": TIER_MAP + "\n}\nserver {", "location-snippet": TIER_HEADER}))
    wait_for(lambda: any("key http-snippet value" in line and "closes a block the snippet did not open" in line
                         and "the previous value" in line for line in problems(stage)), 15,
             what="the snippet reported")
    assert get(stage, **{"X-Plan": "gold"}).headers["X-Tier"] == "premium"


def test_a_snippet_nginx_refuses_is_reported_and_the_rest_keeps_serving(stage: Stage) -> None:
    stage.cluster.apply(configmap(**{"http-snippet": TIER_MAP, "location-snippet": TIER_HEADER}))
    wait_for(lambda: get(stage).headers.get("X-Tier") == "free", 15, what="the snippets applied")
    stage.cluster.apply(configmap(**{"http-snippet": TIER_MAP + "\nno_such_directive on;",
                                     "location-snippet": TIER_HEADER}))
    wait_for(lambda: any("key http-snippet: nginx -t refused it" in line and "no_such_directive" in line
                         for line in problems(stage)), 15, what="the refused snippet reported")
    # A later Ingress is served, with the snippets nginx took before.
    stage.cluster.apply(*stage.backend("LATER", "later"),
                        k8s.ingress("later", [k8s.rule("later.example.com", ("/", "Prefix", "later", 80))]))
    stage.expect("later.example.com", "/", "LATER", timeout=15)
    assert get(stage, host="later.example.com", **{"X-Plan": "gold"}).headers["X-Tier"] == "premium"
    assert b"no_such_directive" not in stage.controller.nginx_conf()
