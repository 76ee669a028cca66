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


def test_temporal_code_trailing_slash_and_rewrite_log(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("NEW"))
    for name, annotations in (
            ("maint307", {"temporal-redirect": "https://status.example.com/", "temporal-redirect-code": "307"}),
            ("slashes", {"force-ssl-redirect": "true"}),
            ("kept", {"force-ssl-redirect": "true", "preserve-trailing-slash": "true"}),
            ("https-ported", {"force-ssl-redirect": "true", "use-port-in-redirects": "true"}),
            ("logged", {"rewrite-target": "/$1", "enable-rewrite-log": "true"})):
        path = "/old/(.*)" if name == "logged" else "/"
        cluster.apply(k8s.ingress(name, [k8s.rule(f"{name}.example.com", (path, "ImplementationSpecific", "new", 80))],
                                  annotations={f"{PREFIX}/{k}": v for k, v in annotations.items()}))
    url = f"http://127.0.0.1:{controller.http_port}"
    port = controller.https_port

    def redirect(host: str, path: str) -> tuple[int, str]:
        answer = requests.get(url + path, headers={"Host": host}, allow_redirects=False, timeout=5)
        return answer.status_code, answer.headers.get("Location", "")

    for host in ("maint307", "slashes", "kept", "https-ported"):
        wait_for(lambda: redirect(f"{host}.example.com", "/")[0] in (307, 308), 15, what=host)
    assert redirect("maint307.example.com", "/x") == (307, "https://status.example.com/")
    # ingress-nginx drops a trailing slash in the redirect to HTTPS unless preserve-trailing-slash keeps it, and
    # names no port (whatever the HTTPS port) unless use-port-in-redirects asks for it.
    assert redirect("slashes.example.com", "/dir/") == (308, "https://slashes.example.com/dir")
    assert redirect("slashes.example.com", "/dir/?a=1") == (308, "https://slashes.example.com/dir/?a=1")
    assert redirect("slashes.example.com:8080", "/") == (308, "https://slashes.example.com")
    assert redirect("kept.example.com", "/dir/") == (308, "https://kept.example.com/dir/")
    assert redirect("https-ported.example.com", "/dir") == (308, f"https://https-ported.example.com:{port}/dir")

    stage.expect("logged.example.com", "/old/page", "NEW")
    wait_for(lambda: 'rewrite-target of default/logged: "/old/page" -> "/page"' in controller.log_path.read_text(),
             10, what="the rewrite logged")


def test_relative_redirects_and_the_port_in_nginxs_own_redirects(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster.apply(*stage.backend("PATHS"))
    for name, annotations in (("absolute", {}), ("relative", {"relative-redirects": "true"}),
                              ("ported", {"use-port-in-redirects": "true"})):
        cluster.apply(k8s.ingress(name, [k8s.rule(f"{name}.example.com", ("/", "Prefix", "paths", 80))],
                                  annotations={f"{PREFIX}/permanent-redirect": "/new$request_uri",
                                               **{f"{PREFIX}/{k}": v for k, v in annotations.items()}}))
    url = f"http://127.0.0.1:{controller.http_port}"

    def location(host: str) -> str:
        answer = requests.get(url + "/x?a=1", headers={"Host": host}, allow_redirects=False, timeout=5)
        return answer.headers.get("Location", "") if answer.status_code == 301 else ""

    for name in ("absolute", "relative", "ported"):
        wait_for(lambda: location(f"{name}.example.com"), 15, what=name)
    # nginx makes a path absolute with the host, without the port (ingress-nginx's port_in_redirect off)...
    assert location("absolute.example.com") == "http://absolute.example.com/new/x?a=1"
    # ...keeps it relative with relative-redirects, and names the port with use-port-in-redirects.
    assert location("relative.example.com") == "/new/x?a=1"
    assert location("ported.example.com") == f"http://ported.example.com:{controller.http_port}/new/x?a=1"
