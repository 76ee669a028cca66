"""Canary through the whole controller, as ingress-nginx's documentation writes it: a second Ingress with
canary: "true" for the same host and path; the header decides, and a change of weight reloads nothing."""
from __future__ import annotations

import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
HOST = "canary.example.com"
RELOADS = "nginx_ingress_controller_success"


def canary_ingress(weight: str) -> dict:
    return k8s.ingress("app-canary", [k8s.rule(HOST, ("/", "Prefix", "app-canary", 80))],
                       annotations={f"{PREFIX}/canary": "true", f"{PREFIX}/canary-by-header": "X-Canary",
                                    f"{PREFIX}/canary-weight": weight})


def served_with(controller, value: str) -> str:
    response = requests.get(f"http://127.0.0.1:{controller.http_port}/", headers={"Host": HOST, "X-Canary": value},
                            timeout=5)
    return response.json()["backend"]


def test_canary_by_header_and_weight_without_reload(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("STABLE", service="app-stable"), *stage.backend("CANARY", service="app-canary"))
    cluster.apply(k8s.ingress("app", [k8s.rule(HOST, ("/", "Prefix", "app-stable", 80))]), canary_ingress("0"))
    stage.expect(HOST, "/", "STABLE")
    wait_for(lambda: served_with(controller, "always") == "CANARY", 10, what="the canary by header")
    assert served_with(controller, "never") == "STABLE"
    reloads = controller.metric(RELOADS)
    cluster.apply(canary_ingress("100"))
    stage.expect(HOST, "/", "CANARY")
    assert served_with(controller, "never") == "STABLE"
    assert controller.metric(RELOADS) == reloads
