"""A real Prometheus (Debian's) scrapes a running controller under load and evaluates the PromQL of
ingress-nginx's published Grafana dashboard (deploy/grafana/dashboards/nginx.json) and of the example alerts
in its Helm chart's values: each returns data with the expected labels and values that match the requests
sent. The same requests are then found in the access log, in ingress-nginx's upstreaminfo format."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.e2e.ingress.scenarios import Stage
from tests.e2e.tls.pki import TestCA, tls_secret
from tests.support import access_log, k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import free_port, wait_for

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
SCRAPE_SECONDS = 1
# The dashboard's template variables, as a user viewing "All" has them.
ALL = {"$controller_class": ".*", "$controller": ".*", "$namespace": ".*", "$ingress": ".*",
       "$exported_namespace": ".*"}
SHOP, BLOG, SECURE = "shop.example.com", "blog.example.com", "secure.example.com"


def dashboard(expr: str) -> str:
    for variable, value in ALL.items():
        expr = expr.replace(variable, value)
    return expr


# The dashboard's panels (verbatim but for the template variables) that need no Kubernetes scrape labels.
REQUEST_VOLUME = dashboard('round(sum(irate(nginx_ingress_controller_requests{controller_pod=~"$controller",'
                           'controller_class=~"$controller_class",namespace=~"$namespace"}[2m])), 0.001)')
INGRESS_REQUEST_VOLUME = dashboard(
    'round(sum(irate(nginx_ingress_controller_requests{controller_pod=~"$controller",controller_class=~'
    '"$controller_class",controller_namespace=~"$namespace",exported_namespace=~"$exported_namespace",'
    'ingress=~"$ingress"}[2m])) by (ingress), 0.001)')
INGRESS_SUCCESS_RATE = dashboard(
    'sum(rate(nginx_ingress_controller_requests{controller_pod=~"$controller",controller_class=~"$controller_class",'
    'namespace=~"$namespace",exported_namespace=~"$exported_namespace",ingress=~"$ingress",status!~"[4-5].*"}[2m]))'
    ' by (ingress) / sum(rate(nginx_ingress_controller_requests{controller_pod=~"$controller",controller_class=~'
    '"$controller_class",namespace=~"$namespace",exported_namespace=~"$exported_namespace",ingress=~"$ingress"}'
    '[2m])) by (ingress)')
SUCCESS_RATE = dashboard(
    'sum(rate(nginx_ingress_controller_requests{controller_pod=~"$controller",controller_class=~"$controller_class",'
    'namespace=~"$namespace",status!~"[4-5].*"}[2m])) / sum(rate(nginx_ingress_controller_requests{controller_pod=~'
    '"$controller",controller_class=~"$controller_class",namespace=~"$namespace"}[2m]))')


def percentile_by_ingress(quantile: str) -> str:
    return dashboard(
        f'histogram_quantile({quantile}, sum(rate(nginx_ingress_controller_request_duration_seconds_bucket{{'
        'ingress!="",controller_pod=~"$controller",controller_class=~"$controller_class",controller_namespace=~'
        '"$namespace",ingress=~"$ingress",exported_namespace=~"$exported_namespace"}[2m])) by (le, ingress))')


CONFIG_RELOADS = dashboard('avg(irate(nginx_ingress_controller_success{controller_pod=~"$controller",'
                           'controller_class=~"$controller_class",controller_namespace=~"$namespace"}[1m])) * 60')
LAST_RELOAD_FAILED = dashboard('count(nginx_ingress_controller_config_last_reload_successful{controller_pod=~'
                               '"$controller",controller_namespace=~"$namespace"} == 0)')
MEMORY = dashboard('avg(nginx_ingress_controller_nginx_process_resident_memory_bytes{controller_pod=~"$controller",'
                   'controller_class=~"$controller_class",controller_namespace=~"$namespace"}) ')
CPU = dashboard('avg (rate (nginx_ingress_controller_nginx_process_cpu_seconds_total{controller_pod=~"$controller",'
                'controller_class=~"$controller_class",controller_namespace=~"$namespace"}[2m])) ')
ACTIVE_CONNECTIONS = dashboard(
    'sum(avg_over_time(nginx_ingress_controller_nginx_process_connections{controller_pod=~"$controller",'
    'controller_class=~"$controller_class",controller_namespace=~"$namespace",state="active"}[2m]))')
INGRESS_REQUEST_SIZE = dashboard(
    'sum(irate(nginx_ingress_controller_request_size_sum{ingress!="",controller_pod=~"$controller",'
    'controller_class=~"$controller_class",controller_namespace=~"$namespace",ingress=~"$ingress",'
    'exported_namespace=~"$exported_namespace"}[2m])) by (ingress)')
# The Helm chart's example alerts.
ALERT_CONFIG_FAILED = "count(nginx_ingress_controller_config_last_reload_successful == 0) > 0"
ALERT_CERTIFICATE_EXPIRY = ('(avg(nginx_ingress_controller_ssl_expire_time_seconds{host!="_"}) by (host) - time())'
                            ' < 604800')
ALERT_TOO_MANY_500S = ('100 * ( sum( nginx_ingress_controller_requests{status=~"5.+"} ) / '
                       'sum(nginx_ingress_controller_requests) ) > 5')


class Prometheus:
    def __init__(self, workdir: Path, target: str) -> None:
        self.port = free_port()
        config = workdir / "prometheus.yml"
        config.write_text(f"global:\n  scrape_interval: {SCRAPE_SECONDS}s\n  evaluation_interval: {SCRAPE_SECONDS}s\n"
                          f"scrape_configs:\n  - job_name: ingress-nginx\n    static_configs:\n"
                          f"      - targets: ['{target}']\n")
        self.log = open(workdir / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={workdir / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: self._get("/-/ready").status_code == 200, 30, what="Prometheus ready")

    def _get(self, path: str, **params) -> requests.Response:
        return requests.get(f"http://127.0.0.1:{self.port}{path}", params=params, timeout=10)

    def query(self, expr: str) -> list[tuple[dict[str, str], float]]:
        """(labels, value) of each series `expr` returns now."""
        answer = self._get("/api/v1/query", query=expr).json()
        assert answer["status"] == "success", (expr, answer)
        return [(series["metric"], float(series["value"][1])) for series in answer["data"]["result"]]

    def by(self, expr: str, label: str) -> dict[str, float]:
        return {labels.get(label, ""): value for labels, value in self.query(expr)}

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.log.close()


def counts(prometheus: Prometheus, expr: str) -> dict[tuple[str, str, str], float]:
    return {(labels.get("ingress", ""), labels.get("path", ""), labels["status"]): value
            for labels, value in prometheus.query(expr)}


def settled(prometheus: Prometheus, expr: str) -> dict[tuple[str, str, str], float]:
    """The counts once two readings three scrapes apart agree (nginx hands them on once a second)."""
    def stable():
        first = counts(prometheus, expr)
        time.sleep(3 * SCRAPE_SECONDS)
        return first if first and counts(prometheus, expr) == first else None
    return wait_for(stable, 30, what="the counts to settle")


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo):
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("observed"))
    yield Stage(controller, cluster, echo)
    controller.stop()


def send(stage: Stage, host: str, path: str, count: int, tag: str) -> None:
    with requests.Session() as session:
        for i in range(count):
            session.get(f"http://127.0.0.1:{stage.controller.http_port}{path}",
                        headers={"Host": host, "X-Request-ID": f"{tag}-{i}"}, timeout=5)


def test_dashboard_and_alert_queries_answer_from_a_real_prometheus(stage, tmp_path):
    ca = TestCA(tmp_path)
    stage.cluster.apply(
        *stage.backend("OBS-SHOP", service="web", namespace="shop"),
        # blog's Service has no ready endpoint: every request answers 503.
        k8s.service("blog", namespace="blog"), k8s.endpoint_slice("blog", [], 80, namespace="blog"),
        tls_secret("secure-cert", ca.issue(SECURE), namespace="shop"),
        k8s.ingress("web", [k8s.rule(SHOP, ("/", "Prefix", "web", 80), ("/api", "Prefix", "web", 80))],
                    namespace="shop"),
        k8s.ingress("secure", [k8s.rule(SECURE, ("/", "Prefix", "web", 80))], namespace="shop",
                    tls=[{"hosts": [SECURE], "secretName": "secure-cert"}]),
        k8s.ingress("blog", [k8s.rule(BLOG, ("/", "Prefix", "blog", 80))], namespace="blog"))
    wait_for(lambda: stage.controller.get("/", SHOP).status_code == 200, 20, what="shop served")
    wait_for(lambda: stage.controller.get("/", BLOG).status_code == 503, 20, what="blog served (503)")
    wait_for(lambda: stage.controller.get("/", SECURE).status_code == 308, 20, what="secure served (HTTPS redirect)")
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{stage.controller.healthz_port}")
    try:
        # The requests that waited for the Ingresses to be served count too: start from what they left.
        before = settled(prometheus, "sum(nginx_ingress_controller_requests) by (ingress, path, status)")
        stage.controller.get("/warm", "nobody.example.com")
        for _ in range(4):
            send(stage, SHOP, "/api/items", 30, "shop-api")
            send(stage, SHOP, "/", 10, "shop-root")
            send(stage, BLOG, "/", 5, "blog")
            time.sleep(1)
        # Workers hand their counts on once a second; then a scrape.
        sent = {("web", "/api", "200"): 120, ("web", "/", "200"): 40, ("blog", "/", "503"): 20}
        expected = {key: before.get(key, 0) + sent.get(key, 0) for key in before.keys() | sent.keys()}
        wait_for(lambda: counts(prometheus, "sum(nginx_ingress_controller_requests) by (ingress, path, status)")
                 == expected, 20, what="every request counted once")
        assert set(prometheus.by("sum(nginx_ingress_controller_requests) by (host)", "host")) == {SHOP, BLOG, SECURE}
        [(labels, _)] = prometheus.query('nginx_ingress_controller_requests{ingress="blog"}')
        # (Prometheus drops empty labels: canary="" is no canary label.)
        assert {k: labels.get(k) for k in ("namespace", "service", "method", "canary", "controller_class")} == {
            "namespace": "blog", "service": "blog", "method": "GET", "canary": None,
            "controller_class": "k8s.io/ingress-nginx"}

        # The dashboard's panels.
        assert prometheus.query(REQUEST_VOLUME)[0][1] > 0
        assert set(prometheus.by(INGRESS_REQUEST_VOLUME, "ingress")) == {"web", "blog", "secure"}
        # 503 is an error: the shop's success rate is 1; the blog, with no successful request at all, has no
        # numerator series (Grafana shows no data for it, as with ingress-nginx).
        success = prometheus.by(INGRESS_SUCCESS_RATE, "ingress")
        assert success["web"] == 1.0 and "blog" not in success
        assert 0.8 < prometheus.query(SUCCESS_RATE)[0][1] < 0.95
        for quantile in ("0.50", "0.90", "0.99"):
            latency = prometheus.by(percentile_by_ingress(quantile), "ingress")
            assert {"web", "blog"} <= set(latency) and 0 < latency["web"] <= 10, latency
        assert {"web", "blog"} <= set(prometheus.by(INGRESS_REQUEST_SIZE, "ingress"))
        # Upstream timings exist only for requests a backend answered.
        assert set(prometheus.by("sum(nginx_ingress_controller_connect_duration_seconds_count) by (ingress)",
                                 "ingress")) == {"web"}
        assert prometheus.query(CONFIG_RELOADS)  # a series (0 reloads a minute is a value)
        assert prometheus.query(LAST_RELOAD_FAILED) == []
        assert prometheus.query(MEMORY)[0][1] > 1e6
        assert prometheus.query(CPU)
        assert prometheus.query(ACTIVE_CONNECTIONS)[0][1] >= 1  # the scrape itself is not through nginx: a client

        # The chart's example alerts: the certificate (valid two days) is within a week of expiry, 11% are 5xx.
        assert prometheus.query(ALERT_CONFIG_FAILED) == []
        expiring = prometheus.by(ALERT_CERTIFICATE_EXPIRY, "host")
        assert list(expiring) == [SECURE] and 86400 < expiring[SECURE] < 2 * 86400 + 60
        [(_, share)] = prometheus.query(ALERT_TOO_MANY_500S)
        errors = sum(n for (_, _, status), n in expected.items() if status.startswith("5"))
        assert share == pytest.approx(100 * errors / sum(expected.values()))
        # The blog's Service has no ready endpoint: an orphan, as ingress-nginx reports it.
        assert prometheus.by('nginx_ingress_controller_orphan_ingress{type="no-endpoint"}', "ingress") == {"blog": 1.0}
        [(info, _)] = prometheus.query("nginx_ingress_controller_ssl_certificate_info")
        assert (info["host"], info["namespace"], info["secret_name"], info["issuer_common_name"],
                info["public_key_algorithm"]) == (SECURE, "shop", "secure-cert", "pyngress test CA", "ECDSA")
    finally:
        prometheus.stop()

    # The access log: the same requests, in ingress-nginx's upstreaminfo format.
    lines = access_log.parse(stage.controller.log_path.read_text(errors="replace").splitlines())
    shop = [line for line in lines if line["req_id"].startswith("shop-api-")]
    assert len(shop) == 120
    assert all(line["request"].startswith("GET /api/items ") and line["status"] == "200" for line in shop)
    assert {line["proxy_upstream_name"] for line in shop} == {"shop-web-80"}
    assert {line["upstream_addr"] for line in shop} == {f"{stage.echo.ips['OBS-SHOP']}:{stage.echo.port}"}
    blog = [line for line in lines if line["req_id"].startswith("blog-")]
    assert len(blog) == 20 and {line["status"] for line in blog} == {"503"}
    assert {line["proxy_upstream_name"] for line in blog} == {"blog-blog-80"}
    assert not [line for line in lines if "/warm" in line["request"]]  # the default backend is not logged
