"""server-snippet and stream-snippet through the whole controller, with allow-snippet-annotations and
annotations-risk-level Critical in its ConfigMap: what a client of the host (and of the stream port) sees,
and that a snippet nginx refuses rejects only its own Ingress."""
from __future__ import annotations

import socket
import subprocess
from typing import Iterator

import pytest

from tests.e2e.ingress.conftest import reachable
from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import free_port, wait_for

PREFIX = "nginx.ingress.kubernetes.io"
CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "controller", "namespace": "ingress"},
             "data": {"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"}}
SERVER_SNIPPET = 'location = /from-snippet {\n    return 200 "from the server snippet";\n}\n' \
                 'if ($http_x_teapot) {\n    return 418;\n}'


@pytest.fixture(scope="module")
def stage(echo) -> Iterator[Stage]:
    with reachable(["--configmap=ingress/controller"]) as (controller, cluster):
        cluster.apply(CONFIGMAP)
        yield Stage(controller, cluster, echo)


def ingress(stage: Stage, name: str, host: str, **annotations: str) -> None:
    stage.cluster.apply(*stage.backend("SNIP", service=f"{name}-svc"))
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", f"{name}-svc", 80))], annotations={
        f"{PREFIX}/{k}": v for k, v in annotations.items()}))


def test_server_snippet_applies_to_the_ingress_hosts_only(stage):
    ingress(stage, "snip", "snip.example.com", **{"server-snippet": SERVER_SNIPPET})
    ingress(stage, "plain", "plain.example.com")
    stage.expect("plain.example.com", "/", "SNIP")
    # The snippet comes with a reload, which --sync-rate-limit may make wait; the routes pushed after it.
    wait_for(lambda: stage.controller.get("/from-snippet", "snip.example.com").text == "from the server snippet"
             and stage.served_by("snip.example.com", "/") == "SNIP", 15, what="the server snippet applied")
    assert stage.controller.get("/", "snip.example.com", headers={"X-Teapot": "1"}).status_code == 418
    # Another host is not touched by it.
    assert stage.controller.get("/from-snippet", "plain.example.com").json()["backend"] == "SNIP"
    assert stage.controller.get("/", "plain.example.com", headers={"X-Teapot": "1"}).status_code == 200

    # The host's server over HTTPS too.
    port = stage.controller.https_port
    out = subprocess.run(["curl", "-sk", "--resolve", f"snip.example.com:{port}:127.0.0.1",
                          f"https://snip.example.com:{port}/from-snippet"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert out == "from the server snippet"


def test_the_oldest_server_snippet_of_a_host_wins_and_a_broken_one_rejects_only_its_ingress(stage):
    ingress(stage, "first", "shared.example.com", **{"server-snippet": SERVER_SNIPPET})
    wait_for(lambda: stage.controller.get("/from-snippet", "shared.example.com").text == "from the server snippet",
             15, what="the first server snippet applied")
    stage.cluster.apply(*stage.backend("SNIP", service="second-svc"))
    stage.cluster.apply(k8s.ingress("second", [k8s.rule("shared.example.com", ("/second", "Prefix", "second-svc", 80))],
                                    annotations={f"{PREFIX}/server-snippet": "location = /from-snippet { return 204; }"}))
    wait_for(lambda: stage.controller.get("/second", "shared.example.com").status_code == 200, 15,
             what="the second Ingress served")
    assert stage.controller.get("/from-snippet", "shared.example.com").text == "from the server snippet"

    ingress(stage, "broken", "broken.example.com", **{"server-snippet": "no_such_directive on;"})
    ingress(stage, "after", "after.example.com")
    stage.expect("after.example.com", "/", "SNIP")
    assert stage.controller.get("/", "broken.example.com").status_code == 404  # refused, not served
    assert stage.controller.get("/from-snippet", "snip.example.com").status_code == 200


def test_stream_snippet_adds_a_stream_server(stage):
    port = free_port()
    ingress(stage, "stream", "stream.example.com", **{
        "stream-snippet": f'server {{\n    listen 127.0.0.1:{port};\n    return "stream snippet says hi";\n}}'})

    def answer() -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
            return connection.recv(100)
    assert wait_for(answer, 15, what="the stream server answering") == b"stream snippet says hi"
    stage.expect("stream.example.com", "/", "SNIP")
