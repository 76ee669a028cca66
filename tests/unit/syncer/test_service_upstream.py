"""service-upstream: the backend is the Service's cluster IP and port, one endpoint, under a name of its own
so that another Ingress on the same Service keeps the endpoints."""
import pytest

ANNOTATION = {"service-upstream": "true"}


def cluster_ip_service(cluster, ip: str | None, name: str = "web") -> None:
    service = cluster.service(name)
    if ip is not None:
        service["spec"]["clusterIP"] = ip
    cluster.endpoint_slice(name, addresses=("10.0.0.1", "10.0.0.2"))


@pytest.mark.parametrize("ip, endpoint", [("10.96.0.15", "10.96.0.15:80"), ("fd00::15", "[fd00::15]:80")])
def test_the_backend_is_the_cluster_ip_beside_an_ingress_that_uses_the_endpoints(cluster, ip, endpoint):
    cluster_ip_service(cluster, ip)
    cluster.ingress("via-service", host="svc.example.com", annotations=ANNOTATION)
    cluster.ingress("via-endpoints", host="eps.example.com")
    model = cluster.build()
    svc, eps = (model.routes[h].prefix["/"].backend for h in ("svc.example.com", "eps.example.com"))
    assert (svc, eps) == ("default-web-80-cluster-ip", "default-web-80")
    assert model.backends[svc] == [endpoint]
    assert sorted(model.backends[eps]) == ["10.0.0.1:8080", "10.0.0.2:8080"]


@pytest.mark.parametrize("ip", [None, "None"])
def test_a_headless_service_answers_503_and_says_why(cluster, ip):
    cluster_ip_service(cluster, ip)
    cluster.ingress("via-service", host="svc.example.com", annotations=ANNOTATION)
    model = cluster.build()
    assert model.routes["svc.example.com"].prefix["/"].backend is None
    assert any("has no cluster IP" in line and "service-upstream" in line for line in model.problem_lines())


def test_false_keeps_the_endpoints(cluster):
    cluster_ip_service(cluster, "10.96.0.15")
    cluster.ingress("web", annotations={"service-upstream": "false"})
    assert cluster.build().routes["app.example.com"].prefix["/"].backend == "default-web-80"
