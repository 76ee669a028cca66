import pytest


def route_backend(model, host="app.example.com", path="/"):
    return model.routes[host].prefix[path].backend


def test_only_ready_endpoints_count_and_a_missing_condition_means_ready(cluster):
    cluster.service("web")
    cluster.endpoint_slice("web", addresses=[("10.0.0.3", True), ("10.0.0.1", None), ("10.0.0.2", False)])
    cluster.ingress("web")
    assert cluster.build().backends == {"default-web-80": ["10.0.0.1:8080", "10.0.0.3:8080"]}


def test_an_address_with_a_nul_is_skipped_and_the_model_still_builds(cluster):
    # A tenant's EndpointSlice: inet_pton raises ValueError, not OSError, for "\x00".
    cluster.service("web")
    cluster.endpoint_slice("web", addresses=["\x00", "10.0.0.1"])
    cluster.ingress("web")
    assert cluster.build().backends == {"default-web-80": ["10.0.0.1:8080"]}


def test_slices_of_a_service_are_merged_deduplicated_and_sorted(cluster):
    cluster.service("web")
    cluster.endpoint_slice("web", addresses=["10.0.0.9", "10.0.0.1"])
    cluster.endpoint_slice("web", addresses=["10.0.0.1", "10.0.0.10"])
    cluster.endpoint_slice("web", ns="elsewhere", addresses=["10.9.9.9"])  # same service name, other namespace
    cluster.endpoint_slice("other", addresses=["10.8.8.8"])
    cluster.ingress("web")
    assert cluster.build().backends["default-web-80"] == ["10.0.0.1:8080", "10.0.0.9:8080", "10.0.0.10:8080"]


def test_ingress_port_number_resolves_through_the_service_port_name_to_the_slice_port(cluster):
    cluster.service("web", ports=[("http", 80), ("https", 443)])
    eps = cluster.endpoint_slice("web", addresses=["10.0.0.1"], port_name="http", port=8080)
    eps["ports"].append({"name": "https", "port": 8443, "protocol": "TCP"})
    cluster.ingress("web", paths=[("/", "Prefix", "web", 443), ("/plain", "Prefix", "web", "http")])
    model = cluster.build()
    assert route_backend(model) == "default-web-443"
    assert route_backend(model, path="/plain") == "default-web-http"  # the port as the Ingress names it
    assert model.backends == {"default-web-443": ["10.0.0.1:8443"], "default-web-http": ["10.0.0.1:8080"]}


def test_an_unnamed_service_port_matches_the_unnamed_slice_port(cluster):
    cluster.service("web", ports=[(None, 80)])
    cluster.endpoint_slice("web", addresses=["10.0.0.1"], port_name=None, port=3000)
    cluster.ingress("web")
    assert cluster.build().backends == {"default-web-80": ["10.0.0.1:3000"]}


def test_ipv6_endpoints_are_bracketed_and_normalised(cluster):
    cluster.service("web")
    cluster.endpoint_slice("web", addresses=["fd00:0:0::1", "fd00::1", "fd00::2"], address_type="IPv6")
    cluster.ingress("web")
    assert cluster.build().backends["default-web-80"] == ["[fd00::1]:8080", "[fd00::2]:8080"]


def test_fqdn_slices_and_addresses_that_are_not_ips_are_skipped(cluster):
    cluster.service("web")
    cluster.endpoint_slice("web", addresses=["pod.example.com"], address_type="FQDN")
    cluster.endpoint_slice("web", addresses=["10.0.0.1", "10.0.0.300", "10.0.0.2;x"])
    cluster.ingress("web")
    assert cluster.build().backends["default-web-80"] == ["10.0.0.1:8080"]


def test_a_missing_service_or_port_gives_a_503_route_and_a_warning(cluster):
    cluster.service("web", ports=[("http", 80)])
    cluster.ingress("a", paths=[("/gone", "Prefix", "nope", 80), ("/noport", "Prefix", "web", 81),
                                ("/noname", "Prefix", "web", "grpc"), ("/again", "Prefix", "nope", 80)])
    model = cluster.build()
    routes = model.routes["app.example.com"].prefix
    assert [routes[p].backend for p in ("/gone", "/noport", "/noname", "/again")] == [None, None, None, None]
    assert model.backends == {}
    assert model.problem_lines() == [  # once per Ingress and backend
        "warning: Ingress default/a: Service default/nope not found; requests for it answer 503",
        "warning: Ingress default/a: Service default/web has no port 81; requests for it answer 503",
        "warning: Ingress default/a: Service default/web has no port 'grpc'; requests for it answer 503",
    ]


def test_a_service_without_ready_endpoints_has_an_empty_backend(cluster):
    cluster.service("web")
    cluster.endpoint_slice("web", addresses=[("10.0.0.1", False)])
    cluster.ingress("web")
    model = cluster.build()
    assert route_backend(model) == "default-web-80"
    assert model.backends == {"default-web-80": []}
    assert model.problem_lines() == []


def test_only_backends_that_routes_use_are_listed(cluster):
    cluster.app("web")
    cluster.service("unused")
    cluster.endpoint_slice("unused")
    assert list(cluster.build().backends) == ["default-web-80"]


def test_external_name_services_resolve_to_their_host_name(cluster):
    cluster.service("ext", type="ExternalName", external_name="API.Example.org", ports=[("https", 443)])
    cluster.ingress("a", paths=[("/", "Prefix", "ext", 8443), ("/named", "Prefix", "ext", "https")])
    model = cluster.build()
    assert model.backends == {"default-ext-8443": ["api.example.org:8443"],
                              "default-ext-https": ["api.example.org:443"]}


def test_external_name_that_is_not_a_dns_name_gives_a_503_route(cluster):
    cluster.service("ext", type="ExternalName", external_name="evil.example.org;rm", ports=[])
    cluster.ingress("a", paths=[("/", "Prefix", "ext", 80)])
    model = cluster.build()
    assert route_backend(model) is None
    assert "externalName 'evil.example.org;rm' is not a DNS name" in model.problem_lines()[0]


def test_a_malformed_service_gives_a_503_route_not_a_failed_build(cluster):
    cluster.add({"kind": "Service", "metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": "80"}})
    cluster.ingress("a")
    model = cluster.build()
    assert route_backend(model) is None
    assert "malformed" in model.problem_lines()[0]


@pytest.mark.parametrize("external_name", [
    "localhost", "LOCALHOST.", "api.localhost", "127.0.0.1", "127.1", "2130706433", "0x7f000001", "0.0.0.0", "0",
    "169.254.169.254",
])
def test_an_external_name_naming_the_node_itself_rejects_its_ingress(cluster, external_name):
    # Security first, attack 1: through such a Service a tenant's Ingress reached nginx's internal API.
    cluster.service("ext", type="ExternalName", external_name=external_name, ports=[("http", 10246)])
    cluster.ingress("tenant", host="x.tenant.example", paths=[("/", "Prefix", "ext", 10246)])
    cluster.app("other", host="other.example.com")
    model = cluster.build()
    assert list(model.routes) == ["other.example.com"]
    assert "default-ext-10246" not in model.backends
    assert cluster.rejections(model) == [
        f"Ingress default/tenant: Service default/ext has type ExternalName with externalName {external_name!r}, "
        "which names the node itself (localhost, a loopback, unspecified or link-local address); point it at a "
        "host outside the node"]


def test_disable_svc_external_name_rejects_every_external_name_backend(cluster):
    cluster.service("ext", type="ExternalName", external_name="api.example.org", ports=[("http", 80)])
    cluster.ingress("a", paths=[("/", "Prefix", "ext", 80)])
    assert "default/a" in cluster.build().routes["app.example.com"].prefix["/"].ingress
    model = cluster.build(disable_svc_external_name=True)
    assert model.routes == {}
    assert cluster.rejections(model) == [
        "Ingress default/a: Service default/ext has type ExternalName, and ExternalName backends are disabled "
        "(--disable-svc-external-name)"]



def test_an_external_name_with_non_ascii_letters_is_not_a_dns_name(cluster):
    cluster.service("ext", type="ExternalName", external_name="\u017f.example.com", ports=[("http", 80)])
    cluster.ingress("a", paths=[("/", "Prefix", "ext", 80)])
    model = cluster.build()
    assert route_backend(model) is None
    assert "is not a DNS name" in model.problem_lines()[0]
