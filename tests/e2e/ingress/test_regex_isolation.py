"""One tenant's regular expression that PCRE refuses must not freeze route changes for the others."""
import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

USE_REGEX = {"nginx.ingress.kubernetes.io/use-regex": "true"}


@pytest.fixture
def stage(manifests_controller, echo):
    controller, cluster = manifests_controller
    return Stage(controller, cluster, echo)


def test_a_regex_pcre_refuses_rejects_only_its_ingress_and_others_still_apply(stage):
    stage.cluster.apply(*stage.backend("REGEX-A", "tenant", namespace="a"),
                        *stage.backend("REGEX-B", "tenant", namespace="b"))
    stage.cluster.apply(k8s.ingress("good", [k8s.rule("good.a.example", ("/", "Prefix", "tenant", 80))],
                                    namespace="a"))
    stage.expect("good.a.example", "/", "REGEX-A")

    # Python's re takes "[:alpha:]" outside brackets; the PCRE nginx's Lua uses does not.
    stage.cluster.apply(k8s.ingress("posix", [k8s.rule("posix.a.example",
                                                       ("/[:alpha:]", "ImplementationSpecific", "tenant", 80))],
                                    namespace="a", annotations=USE_REGEX))
    log = stage.controller.log_path

    def refusal_logged() -> bool:
        return any("Ingress a/posix: host posix.a.example path '/[:alpha:]'" in line and "PCRE (nginx's Lua" in line
                   and "POSIX named classes are supported only within a class" in line
                   for line in log.read_text(errors="replace").splitlines())
    wait_for(refusal_logged, 10, what="the refusal, in PCRE's words, in the controller's log")

    # Another namespace's new Ingress is served at once (a change is served within about a second).
    stage.cluster.apply(k8s.ingress("later", [k8s.rule("later.b.example", ("/", "Prefix", "tenant", 80))],
                                    namespace="b"))
    stage.expect("later.b.example", "/", "REGEX-B", timeout=3)
    assert stage.served_by("posix.a.example", "/a") == "404"  # refused, never served
    assert stage.served_by("good.a.example", "/") == "REGEX-A"
    assert stage.controller.health().status_code == 200
