"""Invalid annotation values, as ingress-nginx treats them (issue 33; docs/migrating.md, "Invalid annotation
values"), through the whole controller and real nginx: an annotation that does not control access is ignored
(the Ingress is served with the default) with a warning naming the Ingress, the annotation and the value; an
access-control one denies the paths (503); lists are read leniently."""
from __future__ import annotations

import re

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"


@pytest.fixture
def stage(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    stage.cluster.apply(*stage.backend("LENIENT", "lenient"))
    return stage


def serve(stage: Stage, name: str, annotations: dict[str, str]) -> str:
    """An Ingress `name` for host <name>.lenient.example with `annotations` (without the prefix); its host."""
    host = f"{name}.lenient.example"
    stage.cluster.apply(k8s.ingress(name, [k8s.rule(host, ("/", "Prefix", "lenient", 80))],
                                    annotations={f"{PREFIX}/{k}": v for k, v in annotations.items()}))
    return host


def logged(stage: Stage, name: str, annotation: str, value: str) -> None:
    """The controller's log names the Ingress, the annotation and the value."""
    line = f"Ingress default/{name}: annotation {PREFIX}/{annotation} value {value!r}"
    wait_for(lambda: line in stage.controller.log_path.read_text(errors="replace"), 10,
             what=f"{line!r} in the controller's log")


def warnings_counted(stage: Stage, name: str) -> float:
    metrics = requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/metrics", timeout=5).text
    match = re.search(rf'pyngress_ingress_problems{{[^}}]*ingress="{name}"[^}}]*severity="warning"[^}}]*}} (\S+)',
                      metrics)
    return float(match[1]) if match else 0.0


@pytest.mark.parametrize("annotation, value", [
    ("proxy-body-size", "15r"), ("proxy-read-timeout", "50k"), ("proxy-connect-timeout", "50k"),
    ("proxy-send-timeout", "50k"), ("proxy-next-upstream-tries", "888888"),
])
def test_an_invalid_value_is_ignored_and_the_ingress_served_with_the_default(stage, annotation, value):
    name = f"ignored-{annotation}"
    host = serve(stage, name, {annotation: value})
    stage.expect(host, "/", "LENIENT")
    logged(stage, name, annotation, value)
    wait_for(lambda: warnings_counted(stage, name) >= 1, 10, what=f"a warning counted for {name}")
    if annotation == "proxy-body-size":  # the default, 1m, applies (judged on Content-Length before reading)
        assert stage.controller.request("POST", "/", host, data=b"x" * 1024).status_code == 200
        assert stage.controller.request("POST", "/", host, data=b"x" * 2 * 1024 * 1024).status_code == 413


def test_an_empty_x_forwarded_prefix_sends_no_header(stage):
    host = serve(stage, "no-prefix", {"x-forwarded-prefix": ""})
    stage.expect(host, "/", "LENIENT")
    assert "x-forwarded-prefix" not in stage.controller.get("/", host).json()["headers"]


def test_a_single_label_server_alias_is_served(stage):
    serve(stage, "alias", {"server-alias": "bar"})
    stage.expect("bar", "/", "LENIENT")


def allowed_origin(stage: Stage, host: str, origin: str) -> str | None:
    return stage.controller.get("/", host, headers={"Origin": origin}).headers.get("Access-Control-Allow-Origin")


def test_cors_answers_the_valid_origins_of_a_sloppy_list_only(stage):
    value = " https://a.example.com , localhost:3000,tauri://localhost, http://:8080, https://b.example.com:8443,"
    host = serve(stage, "cors-list", {"enable-cors": "true", "cors-allow-origin": value})
    stage.expect(host, "/", "LENIENT")
    assert allowed_origin(stage, host, "https://a.example.com") == "https://a.example.com"
    assert allowed_origin(stage, host, "https://b.example.com:8443") == "https://b.example.com:8443"
    for skipped in ("localhost:3000", "tauri://localhost", "http://:8080", "https://c.example.com"):
        assert allowed_origin(stage, host, skipped) is None, skipped
    logged(stage, "cors-list", "cors-allow-origin", value)


def test_a_star_among_cors_origins_allows_every_origin(stage):
    host = serve(stage, "cors-star", {"enable-cors": "true", "cors-allow-origin": "https://a.example.com, *"})
    stage.expect(host, "/", "LENIENT")
    assert allowed_origin(stage, host, "https://elsewhere.example") == "*"


def test_an_invalid_auth_url_denies_the_paths_never_served_open(stage):
    value = "https://invalid..auth.url"
    host = serve(stage, "bad-auth", {"auth-url": value})
    stage.expect(host, "/", "503")
    logged(stage, "bad-auth", "auth-url", value)
