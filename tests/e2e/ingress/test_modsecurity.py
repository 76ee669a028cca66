"""ModSecurity through a running controller (manifests mode): turning the WAF on and off for one Ingress reloads
nginx once each and leaves the Ingress beside it as it was; a modsecurity-snippet that reaches for a file answers
503 on its Ingress's paths and says why. What the CRS does to each kind of request:
tests/integration/nginx/test_modsecurity.py."""
from __future__ import annotations

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for

CONFIGMAP = "ingress/controller"
PREFIX = "nginx.ingress.kubernetes.io"
SHOP, BLOG = "shop.waf.example.com", "blog.waf.example.com"
BROWSER = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
           "Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
SQL_INJECTION = "/search?q=-1839%27%20or%20%271%27%3D%271"  # as in the CRS's regression case 942100-2
ENFORCING = {f"{PREFIX}/enable-modsecurity": "true", f"{PREFIX}/enable-owasp-core-rules": "true",
             f"{PREFIX}/modsecurity-snippet": "Include /etc/nginx/modsecurity/modsecurity.conf\nSecRuleEngine On"}
RELOADS = "nginx_ingress_controller_success"


def shop(annotations: dict[str, str] | None = None) -> dict:
    return k8s.ingress("shop", [k8s.rule(SHOP, ("/", "Prefix", "shop", 80))], annotations=annotations)


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"),
                                                     extra_args=[f"--configmap={CONFIGMAP}"])
    stage = Stage(controller, cluster, echo)
    namespace, name = CONFIGMAP.split("/")
    cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                   "data": {"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"}},
                  *stage.backend("SHOP", "shop"), *stage.backend("BLOG", "blog"), shop(),
                  k8s.ingress("blog", [k8s.rule(BLOG, ("/", "Prefix", "blog", 80))]))
    stage.expect(SHOP, "/", "SHOP")
    stage.expect(BLOG, "/", "BLOG")
    yield stage
    controller.stop()


def problems(stage: Stage) -> list[str]:
    return requests.get(f"http://127.0.0.1:{stage.controller.healthz_port}/status", timeout=5).json()["problems"]


def status(stage: Stage, host: str, path: str = SQL_INJECTION) -> int:
    return stage.controller.get(path, host, headers=BROWSER).status_code


def test_the_waf_on_one_ingress_blocks_its_attacks_alone_after_one_reload(stage: Stage) -> None:
    assert status(stage, SHOP) == 200
    reloads = stage.controller.metric(RELOADS)
    stage.cluster.apply(shop(ENFORCING))
    wait_for(lambda: status(stage, SHOP) == 403, 20, what="the shop's WAF refusing an SQL injection")
    assert status(stage, SHOP, "/search?q=running+shoes") == 200
    assert status(stage, BLOG) == 200  # the Ingress beside it: no WAF
    assert stage.controller.metric(RELOADS) == reloads + 1

    # Back to the default profile: its route serves at once, and the reload that drops the WAF's profile (and the
    # module) follows within --sync-rate-limit.
    stage.cluster.apply(shop())
    wait_for(lambda: status(stage, SHOP) == 200, 20, what="the shop without its WAF")
    wait_for(lambda: stage.controller.metric(RELOADS) == reloads + 2, 20, what="the reload that drops the WAF")
    assert status(stage, BLOG) == 200


def test_a_snippet_that_includes_a_file_denies_its_ingress_and_says_why(stage: Stage) -> None:
    stage.cluster.apply(shop({**ENFORCING, f"{PREFIX}/modsecurity-snippet": "Include /etc/passwd"}))
    wait_for(lambda: status(stage, SHOP, "/") == 503, 20, what="the shop denied")
    assert any("modsecurity-snippet" in p and "may include only ingress-nginx's rule files" in p
               for p in problems(stage))
    assert status(stage, BLOG, "/") == 200
    stage.cluster.apply(shop())
    wait_for(lambda: status(stage, SHOP, "/") == 200, 20, what="the shop served again")


def test_the_configmap_turns_it_on_everywhere_and_a_snippet_nginx_refuses_keeps_the_previous(stage: Stage) -> None:
    namespace, name = CONFIGMAP.split("/")

    def configmap(**data: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
                "data": {"allow-snippet-annotations": "true", "annotations-risk-level": "Critical", **data}}

    stage.cluster.apply(configmap(**{"enable-modsecurity": "true", "enable-owasp-modsecurity-crs": "true",
                                     "modsecurity-snippet": "SecRuleEngine On"}))
    wait_for(lambda: status(stage, SHOP) == 403 and status(stage, BLOG) == 403, 20, what="both Ingresses behind the WAF")
    # A rule ModSecurity cannot parse: nginx -t refuses it, the previous snippet keeps blocking.
    stage.cluster.apply(configmap(**{"enable-modsecurity": "true", "enable-owasp-modsecurity-crs": "true",
                                     "modsecurity-snippet": "SecRuleEngine On\nSecRule ARGS"}))
    wait_for(lambda: any("modsecurity-snippet" in p and "nginx -t refused it" in p for p in problems(stage)), 20,
             what="the refused snippet reported")
    assert status(stage, BLOG) == 403
    stage.cluster.apply(configmap())
    wait_for(lambda: status(stage, SHOP) == 200 and status(stage, BLOG) == 200, 20, what="the WAF off again")
