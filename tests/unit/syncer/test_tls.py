import base64
import functools

import pytest

from services.nginxconf.prefix import make_self_signed
from services.nginxconf.render import render
from services.syncer.model.configmap import ControllerConfig
from services.syncer.model.tls import hsts_header, inspect_certificate, names_match

HSTS = "max-age=31536000; includeSubDomains"
END_CERTIFICATE = b"-----END CERTIFICATE-----\n"


@functools.lru_cache(maxsize=None)
def pems(*names: str, cn: str = "") -> tuple[bytes, bytes]:
    """A real certificate for `names` (made once per run with the openssl CLI) and its key."""
    pem = make_self_signed(f"/CN={cn or names[0]}", names)
    end = pem.index(END_CERTIFICATE) + len(END_CERTIFICATE)
    return pem[:end], pem[end:]


def secret_data(*names: str, key_of: tuple[str, ...] | None = None) -> dict[str, str]:
    cert, key = pems(*names)
    if key_of:
        key = pems(*key_of)[1]
    return {"tls.crt": base64.b64encode(cert).decode(), "tls.key": base64.b64encode(key).decode()}


def tls(*hosts, secret="app-tls"):
    entry = {"hosts": list(hosts)}
    if secret:
        entry["secretName"] = secret
    return [entry]


def test_a_host_listed_in_spec_tls_with_a_usable_secret_has_tls_and_hsts(cluster):
    cluster.tls_secret("app-tls", data=secret_data("app.example.com"))
    cluster.app(tls=tls("App.Example.com"))
    model = cluster.build()
    routes = model.routes["app.example.com"]
    assert (routes.tls, routes.ssl_redirect, routes.force_ssl_redirect, routes.hsts) == (True, True, False, HSTS)
    assert model.tls_secrets == {"app.example.com": "default/app-tls"}
    assert model.problem_lines() == []


@pytest.mark.parametrize("secret, problem", [
    (None, "TLS Secret default/app-tls not found"),
    ({"type": "Opaque"}, "TLS Secret default/app-tls has type 'Opaque', not kubernetes.io/tls"),
    ({"data": {"tls.crt": "Zm9v"}}, "TLS Secret default/app-tls has no tls.key"),
    ({"data": {"tls.crt": "not base64!", "tls.key": "Zm9v"}},
     "TLS Secret default/app-tls has a tls.crt that is not valid base64"),
])
def test_without_a_usable_secret_the_host_stays_a_tls_host_with_the_default_certificate(cluster, secret, problem):
    """As ingress-nginx: the redirect to HTTPS and HSTS stay, and HTTPS answers with the default certificate."""
    if secret is not None:
        cluster.tls_secret("app-tls", **secret)
    cluster.app(tls=tls("app.example.com"))
    model = cluster.build()
    routes = model.routes["app.example.com"]
    assert (routes.tls, routes.ssl_redirect, routes.hsts) == (True, True, HSTS)
    assert model.tls_secrets == {}
    assert model.problem_lines() == [f"warning: Ingress default/web: {problem}; app.example.com served with the "
                                     "default certificate"]


def test_the_secret_must_be_in_the_ingress_namespace(cluster):
    cluster.tls_secret("app-tls", ns="other")
    cluster.app(tls=tls("app.example.com"))
    model = cluster.build()
    assert model.tls_secrets == {} and model.routes["app.example.com"].tls is True


def test_a_host_without_spec_tls_or_certificate_is_no_tls_host(cluster):
    cluster.app()
    routes = cluster.build().routes["app.example.com"]
    assert (routes.tls, routes.hsts) == (False, None)


def test_wildcard_tls_hosts_cover_one_label_of_the_ingresses_own_hosts(cluster):
    cluster.tls_secret("wild", data=secret_data("*.example.com"))
    cluster.tls_secret("exact", data=secret_data("b.example.com"))
    cluster.ingress("apps", rules=[cluster.rule(h, ("/", "Prefix", "web", 80))
                                   for h in ("a.example.com", "b.example.com", "x.y.example.com")],
                    tls=tls("*.example.com", secret="wild") + tls("b.example.com", secret="exact"))
    model = cluster.build()
    assert model.tls_secrets == {"a.example.com": "default/wild", "b.example.com": "default/exact"}
    assert model.routes["x.y.example.com"].tls is False  # a wildcard covers one label only


def test_tls_of_another_ingress_does_not_apply_to_a_host_it_does_not_route(cluster):
    # Security first, attack 3: neither an older nor a newer Ingress's spec.tls reaches the victim's host.
    cluster.tls_secret("victim", data=secret_data("shop.example.com"))
    cluster.tls_secret("thief", data=secret_data("shop.example.com"))
    cluster.ingress("older-thief", rules=[], tls=tls("shop.example.com", secret="thief"),
                    created=cluster.timestamp(1))
    cluster.app("shop", host="shop.example.com", created=cluster.timestamp(5))
    cluster.app("newer-thief", host="other.example.com", tls=tls("shop.example.com", secret="thief"),
                created=cluster.timestamp(9))
    model = cluster.build()
    assert model.tls_secrets == {}
    assert model.routes["shop.example.com"].tls is False and model.routes["shop.example.com"].hsts is None
    assert ("warning: Ingress default/newer-thief: spec.tls lists shop.example.com, which none of this Ingress's "
            "rules name; ignored (TLS applies only to the hosts of the same Ingress)") in model.problem_lines()


def test_oldest_ingress_routing_the_host_chooses_the_certificate(cluster):
    cluster.tls_secret("old", data=secret_data("app.example.com"))
    cluster.tls_secret("new", data=secret_data("app.example.com"))
    cluster.app("new", tls=tls("app.example.com", secret="new"), created=cluster.timestamp(9))
    cluster.ingress("old", rules=[cluster.rule("app.example.com", ("/old", "Prefix", "web", 80))],
                    tls=tls("app.example.com", secret="old"), created=cluster.timestamp(1))
    assert cluster.build().tls_secrets == {"app.example.com": "default/old"}


def test_an_entry_without_secret_name_uses_the_default_certificate(cluster):
    cluster.tls_secret("fallback", ns="ingress", data=secret_data("app.example.com"))
    cluster.app(tls=tls("app.example.com", secret=None))
    assert cluster.build().routes["app.example.com"].tls is True  # with the generated fake certificate
    assert "no secretName and there is no --default-ssl-certificate" in cluster.build().problem_lines()[0]
    model = cluster.build(default_ssl_certificate="ingress/fallback")
    assert model.tls_secrets == {"app.example.com": "ingress/fallback"} and model.problem_lines() == []


def test_a_malformed_tls_entry_rejects_the_ingress(cluster):
    cluster.app(tls=[{"hosts": "app.example.com", "secretName": "app-tls"}])
    model = cluster.build()
    assert model.routes == {}
    assert "hosts must be a list of host names" in model.problem_lines()[0]


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
    assert model.problem_lines() == ["warning: Ingress default/new: ssl-redirect/force-ssl-redirect for host app.example.com "
                              "come from the older Ingress default/old; this Ingress's differ and are ignored"]


@pytest.mark.parametrize("data, header", [
    ({}, HSTS),
    ({"hsts": "false"}, None),
    ({"hsts-max-age": "600", "hsts-include-subdomains": "false"}, "max-age=600"),
    ({"hsts-preload": "true"}, HSTS + "; preload"),
])
def test_hsts_header_from_the_configmap(cluster, data, header):
    cluster.configmap(data)
    cluster.tls_secret(data=secret_data("app.example.com"))
    cluster.app(tls=tls("app.example.com"))
    cluster.app("plain", host="plain.example.com")
    routes = cluster.build().routes
    assert routes["app.example.com"].hsts == header
    assert routes["plain.example.com"].hsts is None  # never on a host without TLS


def test_hsts_header_function():
    assert hsts_header(ControllerConfig(hsts_max_age=0, hsts_include_subdomains=False)) == "max-age=0"


def test_a_host_not_listed_in_spec_tls_takes_the_secret_whose_certificate_names_it(cluster):
    cluster.tls_secret("multi", data=secret_data("listed.example.com", "other.example.com", "*.apps.example.com"))
    cluster.service("web")
    cluster.ingress("web", rules=[cluster.rule(host, ("/", "Prefix", "web", 80)) for host in
                                  ("listed.example.com", "other.example.com", "x.apps.example.com",
                                   "unnamed.example.com")],
                    tls=tls("listed.example.com", secret="multi"))
    model = cluster.build()
    assert model.tls_secrets == {host: "default/multi" for host in
                                 ("listed.example.com", "other.example.com", "x.apps.example.com")}
    assert model.routes["unnamed.example.com"].tls is False  # the default certificate, no redirect
    assert model.certificates["hosts"] == model.tls_secrets and model.problem_lines() == []


def test_a_listed_host_the_certificate_does_not_name_is_served_with_a_warning(cluster):
    cluster.tls_secret("app-tls", data=secret_data("elsewhere.example.com"))
    cluster.app(tls=tls("app.example.com"))
    model = cluster.build()
    assert model.tls_secrets == {"app.example.com": "default/app-tls"}
    assert model.problem_lines() == ["warning: Ingress default/web: TLS Secret default/app-tls holds a certificate for "
                              "elsewhere.example.com, not app.example.com; clients that check host names will "
                              "refuse it"]


def test_a_key_that_does_not_match_its_certificate_leaves_the_host_with_the_default_certificate(cluster):
    cluster.tls_secret("app-tls", data=secret_data("app.example.com", key_of=("someone.else",)))
    cluster.app(tls=tls("app.example.com"))
    model = cluster.build()
    assert model.routes["app.example.com"].tls is True and model.certificates["certs"] == {}
    [problem] = model.problem_lines()
    assert problem.startswith("warning: Ingress default/web: TLS Secret default/app-tls holds a tls.crt and "
                              "tls.key that OpenSSL cannot serve: certificate and key do not load together")
    assert problem.endswith("; app.example.com served with the default certificate")


def test_the_default_certificate_must_be_usable_to_be_the_default(cluster):
    cluster.tls_secret("good", ns="ingress", data=secret_data("default.example.com"))
    cluster.tls_secret("bad", ns="ingress", data=secret_data("default.example.com", key_of=("x.example.com",)))
    cluster.app()
    assert cluster.build(default_ssl_certificate="ingress/good").certificates["default"] == "ingress/good"
    assert cluster.build(default_ssl_certificate="ingress/bad").certificates == {"certs": {}, "hosts": {},
                                                                                 "default": None}


def test_inspect_certificate_reads_subject_alt_names_and_refuses_what_openssl_cannot_load():
    assert inspect_certificate(*pems("A.example.com", "*.b.example.com")).names == ("a.example.com",
                                                                                     "*.b.example.com")
    garbage = inspect_certificate(b"-----BEGIN CERTIFICATE-----\n...", b"junk")
    assert garbage.names == () and "OpenSSL cannot serve" in garbage.problem


@pytest.mark.parametrize("host, names, matches", [
    ("a.example.com", ("a.example.com",), True),
    ("a.example.com", ("*.example.com",), True),
    ("a.b.example.com", ("*.example.com",), False),
    ("example.com", ("*.example.com",), False),
    ("*.example.com", ("*.example.com",), True),
    ("a.example.com", ("b.example.com", "*.other.com"), False),
])
def test_names_match(host, names, matches):
    assert names_match(host, names) is matches


def test_per_ingress_ciphers_give_the_ingress_hosts_a_server_block_of_their_own(cluster):
    cluster.app(annotations={"ssl-ciphers": "ECDHE-RSA-AES128-GCM-SHA256", "ssl-prefer-server-ciphers": "false"})
    model = cluster.build()
    assert not model.problem_lines()
    [(host, name)] = model.config.snippet_servers
    profile = {p.name: p for p in model.config.profiles}[name]
    assert (host, profile.ssl_ciphers, profile.ssl_prefer_server_ciphers) == (
        next(iter(model.routes)), "ECDHE-RSA-AES128-GCM-SHA256", "off")
    conf = render(model.config)
    assert 'ssl_ciphers "ECDHE-RSA-AES128-GCM-SHA256";' in conf and 'ssl_prefer_server_ciphers "off";' in conf


def test_configmap_ssl_protocols_and_ciphers_are_global_settings(cluster):
    cluster.configmap({"ssl-protocols": "TLSv1.3", "ssl-ciphers": "ECDHE-RSA-AES256-GCM-SHA384"})
    config = cluster.build().config
    assert (config.globals["ssl_protocols"], config.globals["ssl_ciphers"]) == ("TLSv1.3",
                                                                                "ECDHE-RSA-AES256-GCM-SHA384")


def test_an_unusable_default_certificate_is_reported_not_silently_replaced():
    from services.common.settings import Settings
    from services.syncer.model.build import build_model
    model = build_model({}, settings=Settings.from_flags(default_ssl_certificate="ingress/missing"))
    assert "warning: --default-ssl-certificate ingress/missing: not found; serving the generated fake certificate instead" in model.problem_lines()
