"""TLSRoute: TLS listeners in Passthrough and Terminate mode (only with --enable-ssl-passthrough), host names (exact
or wildcard) into the passthrough table by hostname intersection, weighted backends, references, and the hosts an
Ingress or an HTTPS listener serves, also under a route's wildcard."""
import pytest

from services.common.objects import object_key
from services.syncer.model.build import build_model
from services.syncer.model.incremental import IncrementalModel

PASSTHROUGH = {"enable_ssl_passthrough": True}


@pytest.fixture
def tls(gw):
    gw.service("secure", ports=(("https", 443),))
    gw.endpoint_slice("secure", addresses=("10.0.0.5",), port_name="https", port=8443)
    return gw


def route(gw, name, *backends, **spec):
    return gw.add(gw.objects.tls_route(name, *backends, created=gw.timestamp(), **spec))


def test_a_tls_listener_needs_the_passthrough_proxy(tls):
    o = tls.objects
    tls.gateway(o.listener("tls", hostname="secure.example.com", passthrough=True),
                {**o.listener("terminate", hostname="t.example.com", passthrough=True), "tls": {"mode": "Terminate"}},
                {**o.listener("odd", hostname="o.example.com", passthrough=True), "tls": {"mode": "Sideways"}})
    route(tls, "secure", o.backend_ref("secure", 443), parents=[{"name": "gw", "sectionName": "tls"}])
    model = tls.build()
    assert model.passthrough == {}
    problems = tls.rejections(model)
    assert any("listener tls: TLS Passthrough needs" in p and "--enable-ssl-passthrough" in p for p in problems)
    assert any("listener terminate: TLS Terminate needs" in p for p in problems)
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {"secure.example.com": ["10.0.0.5:8443"]}
    problems = tls.rejections(model)
    assert any("listener terminate: a listener that terminates TLS needs tls.certificateRefs" in p for p in problems)
    assert any("listener odd: tls.mode 'Sideways'" in p and "UnsupportedValue" in p for p in problems)


def test_a_terminate_listener_puts_its_certificate_beside_the_backends(tls):
    o = tls.objects
    tls.certificate("term-cert", host="t.example.com")
    tls.gateway(o.listener("term", port=443, protocol="TLS", hostname="t.example.com", certificate="term-cert"),
                o.listener("pt", hostname="p.example.com", passthrough=True))
    route(tls, "term", o.backend_ref("web", 80), hostnames=["t.example.com"])
    route(tls, "pt", o.backend_ref("secure", 443), hostnames=["p.example.com"])
    model = tls.build(**PASSTHROUGH)
    entry = model.passthrough["t.example.com"]
    assert entry["backends"] == [{"weight": 1, "endpoints": ["10.0.0.1:8080"]}]
    assert "BEGIN CERTIFICATE" in entry["terminate"]["cert"] and "PRIVATE KEY" in entry["terminate"]["key"]
    assert model.passthrough["p.example.com"] == ["10.0.0.5:8443"]  # mixed modes on one port, by SNI
    assert not tls.rejections(model)


@pytest.mark.parametrize("version", ["gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1alpha2"])
def test_hostnames_are_the_intersection_with_the_listener_wildcards_included(tls, version):
    o = tls.objects
    tls.gateway(o.listener("tls", hostname="*.example.com", passthrough=True))
    tls.add(o.tls_route("secure", o.backend_ref("secure", 443), version=version,
                        hostnames=["a.example.com", "b.example.org", "*.deep.example.com"]))
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {"a.example.com": ["10.0.0.5:8443"], "*.deep.example.com": ["10.0.0.5:8443"]}


def test_a_route_without_hostnames_takes_the_listeners_wildcard(tls):
    o = tls.objects
    tls.gateway(o.listener("tls", hostname="*.example.com", passthrough=True))
    route(tls, "any", o.backend_ref("secure", 443))
    assert tls.build(**PASSTHROUGH).passthrough == {"*.example.com": ["10.0.0.5:8443"]}


def test_a_route_whose_hostnames_miss_the_listener_is_not_attached(tls):
    o = tls.objects
    tls.gateway(o.listener("tls", hostname="secure.example.com", passthrough=True))
    route(tls, "elsewhere", o.backend_ref("secure", 443), hostnames=["other.example.com"])
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {}
    assert any("NoMatchingListenerHostname" in r for r in tls.rejections(model))


def test_httproutes_do_not_attach_to_tls_listeners_nor_tlsroutes_to_http_ones(tls):
    o = tls.objects
    tls.gateway(o.listener("tls", hostname="secure.example.com", passthrough=True),
                o.listener("http", hostname="web.example.com"))
    route(tls, "secure", o.backend_ref("secure", 443), parents=[{"name": "gw", "sectionName": "http"}])
    tls.route("web", parents=[{"name": "gw", "sectionName": "tls"}], rules=[o.rule(o.backend_ref("web"))])
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {} and "secure.example.com" not in model.routes
    assert {r.split(":")[0] for r in tls.rejections(model)} == {"TLSRoute default/secure", "HTTPRoute default/web"}


def test_weighted_backends_and_the_oldest_route_keeps_its_host(tls):
    o = tls.objects
    tls.gateway(o.listener("tls", passthrough=True))
    route(tls, "first", o.backend_ref("secure", 443, weight=0), o.backend_ref("secure", 443, weight=2),
          o.backend_ref("web", 80, weight=1), hostnames=["a.example.com"])
    route(tls, "second", o.backend_ref("web", 80), hostnames=["a.example.com", "b.example.com"])
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {"a.example.com": {"backends": [{"weight": 2, "endpoints": ["10.0.0.5:8443"]},
                                                                {"weight": 1, "endpoints": ["10.0.0.1:8080"]}]},
                                 "b.example.com": ["10.0.0.1:8080"]}
    warnings = tls.warnings(model)
    assert any("TLSRoute default/second" in w and "already passed through for TLSRoute default/first" in w
               for w in warnings)


def test_a_backend_in_another_namespace_needs_a_grant_from_tlsroutes(tls):
    o = tls.objects
    tls.app_service("vault", ns="secrets", address="10.0.0.9")
    tls.gateway(o.listener("tls", passthrough=True))
    route(tls, "vault", o.backend_ref("vault", 80, ns="secrets"), hostnames=["vault.example.com"])
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {"vault.example.com": []}  # the proxy closes its connections
    assert any("RefNotPermitted" in w for w in tls.warnings(model))
    tls.add(o.reference_grant("tls", ns="secrets", from_namespace="default", from_kind="TLSRoute"))
    assert tls.build(**PASSTHROUGH).passthrough == {"vault.example.com": ["10.0.0.9:8080"]}


def test_an_ingress_host_comes_first(tls):
    o = tls.objects
    tls.ingress_class()
    tls.ingress("web", host="taken.example.com")
    tls.ingress("pt", host="pt.example.com", annotations={"nginx.ingress.kubernetes.io/ssl-passthrough": "true"})
    tls.gateway(o.listener("tls", passthrough=True))
    route(tls, "late", o.backend_ref("secure", 443), hostnames=["taken.example.com", "pt.example.com",
                                                                 "free.example.com"])
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {"pt.example.com": ["10.0.0.1:8080"], "free.example.com": ["10.0.0.5:8443"]}
    assert sum("is served by an Ingress, which comes first" in w for w in tls.warnings(model)) == 2


def test_hosts_served_elsewhere_under_a_route_wildcard_go_to_nginx_by_name(tls):
    o = tls.objects
    tls.ingress_class()
    tls.ingress("web", host="web.example.com")
    tls.ingress("wild", host="*.app.example.com")
    tls.gateway(o.listener("tls", passthrough=True))
    route(tls, "wide", o.backend_ref("secure", 443), hostnames=["*.example.com"])
    model = tls.build(**PASSTHROUGH)
    assert model.passthrough == {"*.example.com": ["10.0.0.5:8443"], "web.example.com": "nginx",
                                 "*.app.example.com": "nginx"}


def test_the_incremental_model_follows_routes_and_endpoints_into_the_passthrough_table(tls):
    o = tls.objects
    settings = tls.settings.replace_flags(**PASSTHROUGH)
    tls.gateway(o.listener("tls", passthrough=True))
    incremental = IncrementalModel(settings)
    model = incremental.update(tls.store, None)
    for step in (lambda: route(tls, "secure", o.backend_ref("secure", 443), hostnames=["a.example.com"]),
                 lambda: tls.endpoint_slice("secure", name="more", addresses=("10.0.0.6",), port_name="https",
                                            port=8443)):
        model = incremental.update(tls.store, {object_key(step())})
        assert model == build_model(tls.store, settings=settings)
    assert sorted(model.passthrough["a.example.com"]) == ["10.0.0.5:8443", "10.0.0.6:8443"]


def test_the_incremental_model_follows_a_terminate_listeners_certificate(tls):
    o = tls.objects
    settings = tls.settings.replace_flags(**PASSTHROUGH)
    tls.certificate("term-cert", host="t.example.com")
    tls.gateway(o.listener("term", port=443, protocol="TLS", hostname="t.example.com", certificate="term-cert"))
    route(tls, "term", o.backend_ref("web", 80), hostnames=["t.example.com"])
    incremental = IncrementalModel(settings)
    before = incremental.update(tls.store, None).passthrough["t.example.com"]["terminate"]
    rotated = tls.certificate("term-cert", host="rotated.t.example.com")
    model = incremental.update(tls.store, {object_key(rotated)})
    assert model == build_model(tls.store, settings=settings)
    assert model.passthrough["t.example.com"]["terminate"] != before
