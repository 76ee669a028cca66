"""--watch-namespace-selector and --disable-catch-all against the Kubernetes API test server, as ingress-nginx
does them: only the Ingresses of namespaces whose labels match are served (following the labels as they
change), and an Ingress with a spec.defaultBackend is ignored whole."""
from __future__ import annotations

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.e2e.kube.helpers import api_controller
from tests.support import k8s

SELECTOR = "team in (web,shop),env!=test"


@pytest.fixture(scope="module")
def controller(tmp_path_factory, kubeconfig, cluster):
    controller = api_controller(tmp_path_factory.mktemp("selector"), kubeconfig,
                                f"--watch-namespace-selector={SELECTOR}", "--disable-catch-all").start()
    yield controller
    controller.stop()


@pytest.fixture
def stage(controller, cluster, echo):
    return Stage(controller, cluster, echo)


def namespace(name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def served_in(stage: Stage, ns: str, host: str, backend: str) -> None:
    stage.cluster.apply(*stage.backend(backend, namespace=ns),
                        k8s.ingress(backend.lower(), [k8s.rule(host, ("/", "Prefix", backend.lower(), 80))],
                                    namespace=ns))


def test_only_ingresses_of_matching_namespaces_are_served_following_their_labels(stage):
    stage.cluster.apply(namespace("web", team="web"), namespace("other", team="other"),
                        namespace("web-test", team="web", env="test"))
    # The one served last: once it is, the watch has shown the controller the others.
    served_in(stage, "other", "other.example.com", "OTHER")
    served_in(stage, "web-test", "web-test.example.com", "WEBTEST")
    served_in(stage, "web", "web.example.com", "WEB")
    stage.expect("web.example.com", "/", "WEB")
    stage.expect("other.example.com", "/", "404")
    stage.expect("web-test.example.com", "/", "404")

    stage.cluster.apply(namespace("other", team="shop"))  # relabelled into the selection
    stage.expect("other.example.com", "/", "OTHER")
    stage.cluster.apply(namespace("web", team="web", env="test"))  # and out of it
    stage.expect("web.example.com", "/", "404")
    stage.expect("other.example.com", "/", "OTHER")

    # An Ingress created in a namespace selected already is served at once; deleted, it is gone.
    served_in(stage, "other", "other-two.example.com", "OTHER2")
    stage.expect("other-two.example.com", "/", "OTHER2")
    stage.cluster.delete(k8s.ingress("other2", namespace="other"))
    stage.expect("other-two.example.com", "/", "404")


def test_an_ingress_with_a_default_backend_takes_no_traffic_with_disable_catch_all(stage):
    stage.cluster.apply(namespace("shop", team="shop"), *stage.backend("CATCHER", namespace="shop"),
                        *stage.backend("SHOP", namespace="shop"))
    stage.cluster.apply(k8s.ingress("catch-all", namespace="shop", default_backend=("catcher", 80)),
                        # ingress-nginx ignores any Ingress with a defaultBackend, its rules too.
                        k8s.ingress("with-rules", [k8s.rule("rules.example.com", ("/", "Prefix", "shop", 80))],
                                    namespace="shop", default_backend=("catcher", 80)),
                        k8s.ingress("shop", [k8s.rule("shop.example.com", ("/", "Prefix", "shop", 80))],
                                    namespace="shop"))
    stage.expect("shop.example.com", "/", "SHOP")
    stage.expect("unknown.example.com", "/", "404")
    stage.expect("rules.example.com", "/", "404")

    # Its defaultBackend removed, the Ingress is an ordinary one and is served.
    stage.cluster.apply(k8s.ingress("with-rules", [k8s.rule("rules.example.com", ("/", "Prefix", "shop", 80))],
                                    namespace="shop"))
    stage.expect("rules.example.com", "/", "SHOP")
    stage.expect("unknown.example.com", "/", "404")
