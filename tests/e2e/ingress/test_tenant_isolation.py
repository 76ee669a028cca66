"""Security first, attack 2: one tenant's annotation value must not freeze the controller for the others."""
import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

ALLOWLIST = "nginx.ingress.kubernetes.io/allowlist-source-range"


@pytest.fixture
def stage(manifests_controller, echo):
    controller, cluster = manifests_controller
    return Stage(controller, cluster, echo)


@pytest.mark.parametrize("value", ["fe80::1%$x", "fe80::1%x;y", "10.0.0.0/8, fe80::1%eth0"])
def test_an_unrenderable_annotation_value_rejects_only_its_ingress(stage, value):
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
    assert stage.served_by(bad, "/") == "404"  # refused, never served open
    log = stage.controller.log_path
    wait_for(lambda: f"Ingress default/bad-{suffix}: " in log.read_text(errors="replace"),
             10, what="the rejected Ingress named in the controller's log")
