"""Host ownership across namespaces (issue 31, parts 3 and 4): a host belongs to the namespace of its oldest
Ingress; its certificate, redirects, HSTS and server-level settings come only from that namespace, while paths
of other namespaces are served (or refused whole with the ConfigMap's strict-host-ownership). Every way of adding
a host name (server-alias, from-to-www-redirect) follows the same rules, passthrough hosts included."""
import base64
import functools

import pytest

from services.nginxconf.prefix import make_self_signed
from services.syncer.model.incremental import IncrementalModel

HSTS = "max-age=31536000; includeSubDomains"
OWNED = ("the host belongs to namespace a (its oldest Ingress is a/site), and only that namespace's Ingresses set a "
         "host's certificate, redirects and server-level settings")
PASSTHROUGH = {"ssl-passthrough": "true"}


@functools.lru_cache(maxsize=None)
def _certificate(*names: str) -> dict[str, str]:
    pem = make_self_signed(f"/CN={names[0]}", names)
    end = pem.index(b"-----END CERTIFICATE-----\n") + len(b"-----END CERTIFICATE-----\n")
    return {"tls.crt": base64.b64encode(pem[:end]).decode(), "tls.key": base64.b64encode(pem[end:]).decode()}


def owner_and_newcomer(cluster, *, newcomer_annotations=None, newcomer_tls=True):
    """Namespace a (older) serves a.test; namespace b adds one path, /admin/x, on a.test, with a spec.tls and a
    Secret of its own for a.test."""
    cluster.app("site", ns="a", host="a.test", created=cluster.timestamp(1))
    cluster.ingress("admin", ns="a", host="a.test", paths=[("/admin", "Prefix", "site", 80)],
                    created=cluster.timestamp(2))
    cluster.service("intruder", ns="b")
    cluster.endpoint_slice("intruder", ns="b", addresses=["10.0.9.9"])
    cluster.tls_secret("a-cert", ns="b", data=_certificate("a.test"))
    cluster.ingress("intruder", ns="b", host="a.test", paths=[("/admin/x", "Prefix", "intruder", 80)],
                    tls=[{"hosts": ["a.test"], "secretName": "a-cert"}] if newcomer_tls else None,
                    annotations=newcomer_annotations, created=cluster.timestamp(3))


def assert_incremental_agrees(cluster, **settings):
    settings_ = cluster.settings.replace_flags(**settings)
    assert IncrementalModel(settings_).update(cluster.store, None) == cluster.build(**settings)


def test_a_path_on_someone_elses_host_brings_no_certificate_no_redirect_and_no_hsts(cluster):
    owner_and_newcomer(cluster)
    model = cluster.build()
    routes = model.routes["a.test"]
    assert (routes.tls, routes.hsts) == (False, None)
    assert "a.test" not in model.tls_secrets and model.certificates.get("hosts", {}).get("a.test") is None
    # The path itself is served, as ingress-nginx serves it.
    assert routes.prefix["/admin/x"].ingress == "b/intruder"
    assert routes.prefix["/admin"].ingress == "a/admin" and routes.prefix["/"].ingress == "a/site"
    assert model.problem_lines() == [f"warning: Ingress b/intruder: spec.tls is ignored for host a.test: {OWNED}"]
    assert_incremental_agrees(cluster)


def test_the_owners_namespace_still_sets_tls_from_a_newer_ingress(cluster):
    cluster.app("site", ns="a", host="a.test", created=cluster.timestamp(1))
    cluster.tls_secret("a-cert", ns="a", data=_certificate("a.test"))
    cluster.ingress("tls", ns="a", host="a.test", paths=[("/secure", "Prefix", "site", 80)],
                    tls=[{"hosts": ["a.test"], "secretName": "a-cert"}], created=cluster.timestamp(2))
    model = cluster.build()
    assert (model.routes["a.test"].tls, model.routes["a.test"].hsts) == (True, HSTS)
    assert model.tls_secrets == {"a.test": "a/a-cert"}
    assert model.problem_lines() == []


def test_ownership_passes_to_the_next_oldest_ingress_when_the_owners_go(cluster):
    owner_and_newcomer(cluster)
    for name in ("site", "admin"):
        del cluster.store[f"Ingress/a/{name}"]
    model = cluster.build()
    assert model.tls_secrets == {"a.test": "b/a-cert"} and model.routes["a.test"].hsts == HSTS
    assert model.problem_lines() == []


@pytest.mark.parametrize("annotations, setting", [
    ({"app-root": "/intruder"}, "app-root"),
    ({"use-regex": "true"}, "use-regex"),
    ({"force-ssl-redirect": "true"}, None),  # the oldest Ingress's flags, as before: warned as differing
])
def test_host_level_annotations_of_another_namespace_are_ignored(cluster, annotations, setting):
    owner_and_newcomer(cluster, newcomer_annotations=annotations, newcomer_tls=False)
    model = cluster.build()
    routes = model.routes["a.test"]
    assert (routes.app_root, routes.regex, routes.force_ssl_redirect) == (None, False, False)
    assert routes.prefix["/admin/x"].ingress == "b/intruder"
    expected = (f"warning: Ingress b/intruder: {setting} is ignored for host a.test: {OWNED}" if setting else
                "warning: Ingress b/intruder: ssl-redirect/force-ssl-redirect for host a.test come from the older "
                "Ingress a/site; this Ingress's differ and are ignored")
    assert model.problem_lines() == [expected]
    assert_incremental_agrees(cluster)


def test_a_default_backend_of_another_namespace_does_not_take_the_hosts_unmatched_paths(cluster):
    cluster.app("site", ns="a", host="a.test", created=cluster.timestamp(1))
    cluster.service("intruder", ns="b")
    cluster.ingress("intruder", ns="b", host="a.test", paths=[("/x", "Exact", "intruder", 80)],
                    default_backend=cluster.backend("intruder", 80), created=cluster.timestamp(2))
    model = cluster.build()
    assert model.routes["a.test"].default is None and model.routes["a.test"].exact["/x"].ingress == "b/intruder"
    assert f"warning: Ingress b/intruder: spec.defaultBackend is ignored for host a.test: {OWNED}" in \
        model.problem_lines()


def test_a_server_snippet_of_another_namespace_is_ignored(cluster):
    cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    owner_and_newcomer(cluster, newcomer_annotations={"server-snippet": "return 418;"}, newcomer_tls=False)
    model = cluster.build()
    assert model.config.snippet_servers == ()
    assert model.problem_lines() == [f"warning: Ingress b/intruder: server-snippet is ignored for host a.test: "
                                     f"{OWNED}"]


def test_client_certificate_paths_of_another_namespace_are_not_served_rather_than_served_open(cluster):
    ca = make_self_signed("/CN=b CA", ("ca.b.test",)).decode()
    ca = ca[:ca.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")]
    cluster.tls_secret("ca", ns="b", type="Opaque", data={"ca.crt": base64.b64encode(ca.encode()).decode()})
    owner_and_newcomer(cluster, newcomer_annotations={"auth-tls-secret": "b/ca"}, newcomer_tls=False)
    model = cluster.build()
    routes = model.routes["a.test"]
    assert routes.client_auth == {} and "/admin/x" not in routes.prefix
    assert model.problem_lines() == [f"warning: Ingress b/intruder: auth-tls-* refuses the Ingress's paths for host "
                                     f"a.test: {OWNED}"]
    assert_incremental_agrees(cluster)


def test_strict_host_ownership_refuses_the_newcomer_whole(cluster):
    cluster.configmap({"strict-host-ownership": "true"})
    owner_and_newcomer(cluster)
    cluster.ingress("own", ns="b", host="b.test", paths=[("/", "Prefix", "intruder", 80)],
                    created=cluster.timestamp(4))
    model = cluster.build()
    assert sorted(model.routes["a.test"].prefix) == ["/", "/admin"]
    assert model.routes["b.test"].prefix["/"].ingress == "b/own"  # the namespace's other Ingresses are served
    assert cluster.rejections(model) == [
        "Ingress b/intruder: a.test (owned by Ingress a/site, older) belongs to another namespace, and the "
        "ConfigMap's strict-host-ownership refuses Ingresses on a host another namespace owns; use a host of "
        "your own, or ask the owner to serve the path"]
    assert_incremental_agrees(cluster)


def test_strict_host_ownership_lets_the_owners_namespace_share_its_host(cluster):
    cluster.configmap({"strict-host-ownership": "true"})
    cluster.app("site", ns="a", host="a.test")
    cluster.ingress("admin", ns="a", host="a.test", paths=[("/admin", "Prefix", "site", 80)])
    model = cluster.build()
    assert sorted(model.routes["a.test"].prefix) == ["/", "/admin"] and model.problem_lines() == []


def test_strict_host_ownership_counts_passthrough_hosts(cluster):
    cluster.configmap({"strict-host-ownership": "true"})
    cluster.app("pt", ns="a", host="pt.test", annotations=PASSTHROUGH, created=cluster.timestamp(1))
    cluster.app("http", ns="b", host="pt.test", created=cluster.timestamp(2))
    model = cluster.build(enable_ssl_passthrough=True)
    assert model.routes == {} and list(model.passthrough) == ["pt.test"]
    [refusal] = cluster.rejections(model)
    assert refusal.startswith("Ingress b/http: pt.test (owned by Ingress a/pt, older) belongs to another namespace")


def test_a_server_alias_never_takes_a_passthrough_host(cluster):
    cluster.app("pt", ns="a", host="pt.test", annotations=PASSTHROUGH, created=cluster.timestamp(1))
    cluster.app("web", ns="b", host="b.test", annotations={"server-alias": "pt.test,alias.b.test"},
                created=cluster.timestamp(2))
    model = cluster.build(enable_ssl_passthrough=True)
    assert "pt.test" not in model.routes and list(model.passthrough) == ["pt.test"]
    assert model.routes["alias.b.test"] is model.routes["b.test"]
    assert model.problem_lines() == ["warning: Ingress b/web: server-alias pt.test is passed through by SNI for "
                                     "Ingress a/pt; skipped"]
    assert_incremental_agrees(cluster, enable_ssl_passthrough=True)


def test_a_www_redirect_never_takes_a_passthrough_host(cluster):
    cluster.app("pt", ns="a", host="www.shop.test", annotations=PASSTHROUGH, created=cluster.timestamp(1))
    cluster.app("shop", ns="b", host="shop.test", annotations={"from-to-www-redirect": "true"},
                created=cluster.timestamp(2))
    model = cluster.build(enable_ssl_passthrough=True)
    assert sorted(model.routes) == ["shop.test"] and list(model.passthrough) == ["www.shop.test"]
    assert model.problem_lines() == ["warning: Ingress b/shop: from-to-www-redirect: www.shop.test is passed through "
                                     "by SNI for Ingress a/pt; not redirected to shop.test"]
    assert_incremental_agrees(cluster, enable_ssl_passthrough=True)


def test_aliases_and_www_redirects_come_only_from_the_owners_namespace(cluster):
    owner_and_newcomer(cluster, newcomer_annotations={"server-alias": "mine.b.test", "from-to-www-redirect": "true"},
                       newcomer_tls=False)
    model = cluster.build()
    assert sorted(model.routes) == ["a.test"]
    assert model.problem_lines() == [
        f"warning: Ingress b/intruder: from-to-www-redirect is ignored for host a.test: {OWNED}",
        f"warning: Ingress b/intruder: server-alias is ignored for host a.test: {OWNED}",
        "warning: Ingress b/intruder: server-alias needs a rule with a host of the Ingress's namespace; ignored"]
    assert_incremental_agrees(cluster)


def test_a_server_alias_naming_another_namespaces_host_is_refused_naming_its_owner(cluster):
    cluster.app("site", ns="a", host="a.test", created=cluster.timestamp(1))
    cluster.app("web", ns="b", host="b.test", annotations={"server-alias": "a.test"}, created=cluster.timestamp(2))
    model = cluster.build()
    assert model.routes["a.test"].prefix["/"].ingress == "a/site"
    assert model.problem_lines() == ["warning: Ingress b/web: server-alias a.test is served by Ingress a/site; skipped"]


def test_a_plain_path_a_regex_host_cannot_compile_is_dropped_alone(cluster):
    cluster.app("site", ns="a", host="a.test", annotations={"use-regex": "true"})
    cluster.service("site", ns="b")
    cluster.ingress("odd", ns="b", host="a.test", paths=[("/x(", "ImplementationSpecific", "site", 80),
                                                                ("/y", "Prefix", "site", 80)])
    model = cluster.build()
    assert sorted(model.routes["a.test"].prefix) == ["/", "/y"]
    [warning] = model.problem_lines()
    assert warning.startswith("warning: Ingress b/odd: host a.test path '/x(': ") and "not served" in warning
