"""server-alias through the whole controller: the aliases answer with the host's routes, without a reload, and
a host another Ingress routes stays its own."""
from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"


def test_aliases_answer_with_the_hosts_routes_without_reload(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("MAIN"), *stage.backend("OTHER"),
                  k8s.ingress("other", [k8s.rule("taken.example.com", ("/", "Prefix", "other", 80))]))
    stage.expect("taken.example.com", "/", "OTHER")
    reloads = controller.settled_reloads()
    cluster.apply(k8s.ingress("main", [k8s.rule("main.example.com", ("/", "Prefix", "main", 80))], annotations={
        f"{PREFIX}/server-alias": "alias.example.com,*.wild.example.com,taken.example.com"}))
    for host in ("main.example.com", "alias.example.com", "x.wild.example.com"):
        stage.expect(host, "/page", "MAIN")
    assert stage.served_by("taken.example.com", "/") == "OTHER"
    assert stage.served_by("unknown.example.com", "/") == "404"
    assert controller.metric("nginx_ingress_controller_success") == reloads
    # The alias it could not have is a warning line and a metric of the Ingress that lost it.
    wait_for(lambda: controller.metric("pyngress_ingress_problems", namespace="default", ingress="main",
                                       severity="warning") == 1, 15, what="the metric of the losing Ingress")
    assert any("server-alias taken.example.com is served by Ingress default/other; skipped" in p
               for p in controller.problems())
