"""permanent-redirect (with its code) and temporal-redirect as a client sees them, with the request's variables
ingress-nginx users write in the target."""
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"


def test_redirect_targets_with_the_requests_variables(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("OLD"))
    for name, annotations in (
            ("moved", {"permanent-redirect": "https://new.example.com$request_uri"}),
            ("moved308", {"permanent-redirect": "https://new.example.com/v2$uri$is_args$args",
                          "permanent-redirect-code": "308"}),
            ("maint", {"temporal-redirect": "https://status.example.com/?from=$host"})):
        cluster.apply(k8s.ingress(name, [k8s.rule(f"{name}.example.com", ("/", "Prefix", "old", 80))],
                                  annotations={f"{PREFIX}/{k}": v for k, v in annotations.items()}))
    url = f"http://127.0.0.1:{controller.http_port}"

    def redirect(host: str, path: str) -> tuple[int, str]:
        answer = requests.get(url + path, headers={"Host": host}, allow_redirects=False, timeout=5)
        return answer.status_code, answer.headers.get("Location", "")

    for host in ("moved", "moved308", "maint"):  # each Ingress is a manifest file of its own
        wait_for(lambda: redirect(f"{host}.example.com", "/")[0] in (301, 302, 308), 15, what=host)
    assert redirect("moved.example.com", "/a/b?x=1") == (301, "https://new.example.com/a/b?x=1")
    assert redirect("moved308.example.com", "/a?x=1") == (308, "https://new.example.com/v2/a?x=1")
    assert redirect("moved308.example.com", "/a") == (308, "https://new.example.com/v2/a")
    assert redirect("maint.example.com", "/page") == (302, "https://status.example.com/?from=maint.example.com")
