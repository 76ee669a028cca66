"""service-upstream through the whole controller: with the annotation nginx proxies to the Service's
cluster IP and port (here an address where another echo backend listens), without it to the endpoints."""
from __future__ import annotations

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s

PREFIX = "nginx.ingress.kubernetes.io"


def test_service_upstream_proxies_to_the_cluster_ip_and_others_keep_the_endpoints(manifests_controller, echo):
    controller, cluster = manifests_controller
    stage = Stage(controller, cluster, echo)
    cluster_ip = echo.ips.get("CLUSTER-IP") or echo.start("CLUSTER-IP")
    service, slice_ = stage.backend("POD", service="upstream")
    service["spec"]["clusterIP"] = cluster_ip
    service["spec"]["ports"][0]["port"] = echo.port  # the cluster IP answers on the Service port
    slice_["ports"][0]["port"] = echo.port
    cluster.apply(service, slice_)
    port = echo.port
    cluster.apply(
        k8s.ingress("via-service", [k8s.rule("svc.upstream.example", ("/", "Prefix", "upstream", port))],
                    annotations={f"{PREFIX}/service-upstream": "true"}),
        k8s.ingress("via-endpoints", [k8s.rule("eps.upstream.example", ("/", "Prefix", "upstream", port))]))
    stage.expect("svc.upstream.example", "/", "CLUSTER-IP")
    stage.expect("eps.upstream.example", "/", "POD")
