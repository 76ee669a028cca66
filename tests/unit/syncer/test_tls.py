import pytest

from services.syncer.configmap import ControllerConfig
from services.syncer.tls import hsts_header

HSTS = "max-age=31536000; includeSubDomains"


def tls(*hosts, secret="app-tls"):
    entry = {"hosts": list(hosts)}
    if secret:
        entry["secretName"] = secret
    return [entry]


def test_a_host_listed_in_spec_tls_with_a_usable_secret_has_tls_and_hsts(cluster):
    cluster.tls_secret("app-tls")
    cluster.app(tls=tls("App.Example.com"))
    model = cluster.build()
    routes = model.routes["app.example.com"]
    assert (routes.tls, routes.ssl_redirect, routes.force_ssl_redirect, routes.hsts) == (True, True, False, HSTS)
    assert model.tls_secrets == {"app.example.com": "default/app-tls"}
    assert model.problems == []


@pytest.mark.parametrize("secret, problem", [
    (None, "TLS Secret default/app-tls not found"),
    ({"type": "Opaque"}, "TLS Secret default/app-tls has type 'Opaque', not kubernetes.io/tls"),
    ({"data": {"tls.crt": "Zm9v"}}, "TLS Secret default/app-tls has no tls.key"),
    ({"data": {"tls.crt": "not base64!", "tls.key": "Zm9v"}},
     "TLS Secret default/app-tls has a tls.crt that is not valid base64"),
])
def test_without_a_usable_secret_the_host_is_served_without_tls(cluster, secret, problem):
    if secret is not None:
        cluster.tls_secret("app-tls", **secret)
    cluster.app(tls=tls("app.example.com"))
    model = cluster.build()
    routes = model.routes["app.example.com"]
    assert (routes.tls, routes.hsts) == (False, None)
    assert model.tls_secrets == {}
    assert model.problems == [f"warning: Ingress default/web: {problem}; app.example.com served without it"]


def test_the_secret_must_be_in_the_ingress_namespace(cluster):
    cluster.tls_secret("app-tls", ns="other")
    cluster.app(tls=tls("app.example.com"))
    assert cluster.build().routes["app.example.com"].tls is False


def test_tls_from_another_ingress_and_wildcards_cover_a_host(cluster):
    cluster.tls_secret("wild")
    cluster.tls_secret("exact")
    cluster.app("a", host="a.example.com")
    cluster.app("b", host="b.example.com")
    cluster.app("deep", host="x.y.example.com")
    cluster.ingress("certs-only", rules=[],
                    tls=tls("*.example.com", secret="wild") + tls("b.example.com", secret="exact"))
    model = cluster.build()
    assert model.tls_secrets == {"a.example.com": "default/wild", "b.example.com": "default/exact"}
    assert model.routes["x.y.example.com"].tls is False  # a wildcard covers one label only


def test_oldest_ingress_chooses_the_certificate(cluster):
    cluster.tls_secret("old")
    cluster.tls_secret("new")
    cluster.app("new", tls=tls("app.example.com", secret="new"), created=cluster.timestamp(9))
    cluster.ingress("old", rules=[], tls=tls("app.example.com", secret="old"), created=cluster.timestamp(1))
    assert cluster.build().tls_secrets == {"app.example.com": "default/old"}


def test_an_entry_without_secret_name_uses_the_default_certificate(cluster):
    cluster.tls_secret("fallback", ns="ingress")
    cluster.app(tls=tls("app.example.com", secret=None))
    assert cluster.build().routes["app.example.com"].tls is False
    assert "no secretName and there is no --default-ssl-certificate" in cluster.build().problems[0]
    model = cluster.build(default_ssl_certificate="ingress/fallback")
    assert model.tls_secrets == {"app.example.com": "ingress/fallback"} and model.problems == []


def test_a_malformed_tls_entry_rejects_the_ingress(cluster):
    cluster.app(tls=[{"hosts": "app.example.com", "secretName": "app-tls"}])
    model = cluster.build()
    assert model.routes == {}
    assert "hosts must be a list of host names" in model.problems[0]


def test_ssl_redirect_annotations_and_configmap_defaults(cluster):
    cluster.configmap({"ssl-redirect": "false", "force-ssl-redirect": "true"})
    cluster.app("a", host="a.example.com")
    cluster.app("b", host="b.example.com", annotations={"ssl-redirect": "true", "force-ssl-redirect": "false"})
    routes = cluster.build().routes
    assert (routes["a.example.com"].ssl_redirect, routes["a.example.com"].force_ssl_redirect) == (False, True)
    assert (routes["b.example.com"].ssl_redirect, routes["b.example.com"].force_ssl_redirect) == (True, False)


def test_a_host_takes_its_ssl_flags_from_its_oldest_ingress(cluster):
    cluster.service("web")
    cluster.ingress("old", paths=[("/", "Prefix", "web", 80)])
    cluster.ingress("new", paths=[("/new", "Prefix", "web", 80)], annotations={"ssl-redirect": "false"})
    model = cluster.build()
    assert model.routes["app.example.com"].ssl_redirect is True
    assert model.problems == ["warning: Ingress default/new: ssl-redirect/force-ssl-redirect for host app.example.com "
                              "come from the older Ingress default/old; this Ingress's differ and are ignored"]


@pytest.mark.parametrize("data, header", [
    ({}, HSTS),
    ({"hsts": "false"}, None),
    ({"hsts-max-age": "600", "hsts-include-subdomains": "false"}, "max-age=600"),
    ({"hsts-preload": "true"}, HSTS + "; preload"),
])
def test_hsts_header_from_the_configmap(cluster, data, header):
    cluster.configmap(data)
    cluster.tls_secret()
    cluster.app(tls=tls("app.example.com"))
    cluster.app("plain", host="plain.example.com")
    routes = cluster.build().routes
    assert routes["app.example.com"].hsts == header
    assert routes["plain.example.com"].hsts is None  # never on a host without TLS


def test_hsts_header_function():
    assert hsts_header(ControllerConfig(hsts_max_age=0, hsts_include_subdomains=False)) == "max-age=0"
