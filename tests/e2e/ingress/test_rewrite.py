"""rewrite-target, use-regex and app-root through the whole controller, as ingress-nginx's documentation writes
them: the backend receives the rewritten path; an Ingress without annotations on the same host is matched as a
regular expression too; "/" redirects to the app root."""
from __future__ import annotations

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s

PREFIX = "nginx.ingress.kubernetes.io"
HOST = "rewrite.example.com"


def test_rewrite_target_with_captures_and_app_root(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("REWRITE"), *stage.backend("SITE"))
    cluster.apply(
        k8s.ingress("rewrite", [k8s.rule(HOST, ("/something(/|$)(.*)", "ImplementationSpecific", "rewrite", 80))],
                    annotations={f"{PREFIX}/rewrite-target": "/$2", f"{PREFIX}/app-root": "/app1",
                                 f"{PREFIX}/x-forwarded-prefix": "/something"}),
        k8s.ingress("site", [k8s.rule(HOST, ("/", "Prefix", "site", 80))]))
    stage.expect(HOST, "/something/new?q=1", "REWRITE")
    answer = controller.get("/something/new?q=1", HOST).json()
    assert answer["path"] == "/new?q=1"
    assert answer["headers"]["x-forwarded-prefix"] == "/something"
    assert controller.get("/something", HOST).json()["path"] == "/"
    # The two Ingresses are two files: the watcher may take them in two scans, so "site" may come a moment later.
    stage.expect(HOST, "/other", "SITE")
    redirect = controller.get("/", HOST)
    assert (redirect.status_code, redirect.headers["location"]) == (302, f"http://{HOST}/app1")
