"""The admission webhook's decision (services/syncer/admission/review.py): an Ingress is judged as the syncer's
model judges it, before it is stored. Each decision class: other classes untouched, invalid values (denied for
access control, a warning otherwise), risk level, snippets, blocked words, host+path conflicts, host ownership,
Services and Secrets, location settings nginx would refuse, and the IngressNightmare payloads."""
import base64

import pytest

from services.common.objects import object_key
from services.nginxconf.prefix import make_self_signed
from services.syncer.admission.review import Reviewer, Verdict
from tests.support.cve_corpus import BREAKOUTS, LEAK_FILE, PAYLOADS

PREFIX = "nginx.ingress.kubernetes.io"
CA = make_self_signed("/CN=admission CA", ("ca.admission.example",)).decode()
CA_CERT = CA[:CA.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")]
HTPASSWD = base64.b64encode(b"ann:$apr1$salt1234$5uQ0RdqUxMqVc9eZlZ8P1.\n").decode()


def reviewer_of(cluster, **settings) -> Reviewer:
    reviewer = Reviewer(cluster.settings.replace_flags(**settings))
    reviewer.replace_store(cluster.store)
    return reviewer


def review(cluster, name="candidate", *, operation="CREATE", settings=None, **ingress):
    """The verdict on a new Ingress `name` (made as cluster.ingress makes it) against the cluster's store."""
    candidate = cluster.ingress(name, **ingress)
    del cluster.store[object_key(candidate)]
    return reviewer_of(cluster, **(settings or {})).review(candidate, operation=operation)


def denied(verdict) -> str:
    assert not verdict.allowed, verdict
    assert verdict.message == "\n".join(verdict.errors)
    return verdict.message


@pytest.fixture
def web(cluster):
    """The Service web (port 80, named http) with an endpoint, and nothing else."""
    cluster.service("web")
    cluster.endpoint_slice("web")
    return cluster


# --- whose Ingress ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("how", [dict(class_name="other"), dict(class_name=None,
                                 annotations={"kubernetes.io/ingress.class": "traefik"})])
def test_an_ingress_of_another_class_is_allowed_untouched(web, how):
    web.ingress_class("other", controller="example.com/other")
    web.app("taken", host="app.example.com")
    annotations = {**how.pop("annotations", {}), "configuration-snippet": "return 200;"}
    verdict = review(web, annotations=annotations, **how)  # same host and path as "taken", and a snippet
    assert verdict.allowed and not verdict.warnings and not verdict.message


def test_an_ingress_of_a_namespace_the_controller_does_not_serve_is_allowed_untouched(web):
    web.app("taken", host="app.example.com")
    snippet = {"configuration-snippet": "return 200;"}  # refused, and on a path "taken" defines
    assert not review(web, ns="team-b", annotations=snippet, settings={"watch_namespace": "team-a"}).message
    assert denied(review(web, ns="team-a", annotations=snippet, settings={"watch_namespace": "team-a"}))
    # --watch-namespace-selector, against the Namespace objects of the store (as `pyngress lint` reads them).
    for name, labels in (("team-a", {"team": "a"}), ("team-b", {"team": "b"})):
        web.store[f"Namespace//{name}"] = {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": name, "labels": labels}}
    selector = {"watch_namespace_selector": "team=a"}
    for unserved in ("team-b", "team-c"):  # labels that do not match, and a namespace not known
        verdict = review(web, ns=unserved, annotations=snippet, settings=selector)
        assert verdict.allowed and not verdict.warnings and not verdict.message
    assert denied(review(web, ns="team-a", annotations=snippet, settings=selector))
    # Without the selector the Namespaces mean nothing: every namespace is served.
    assert denied(review(web, ns="team-b", annotations=snippet))


def test_without_namespace_objects_the_selector_cannot_tell_and_the_ingress_is_judged(web):
    assert denied(review(web, ns="team-b", annotations={"configuration-snippet": "return 200;"},
                         settings={"watch_namespace_selector": "team=a"}))


def test_a_delete_is_allowed(web):
    web.app("taken")
    assert review(web, operation="DELETE", annotations={"configuration-snippet": "x"}).allowed


def test_a_valid_ingress_is_allowed_without_warnings(web):
    verdict = review(web, annotations={"proxy-read-timeout": "30", "ssl-redirect": "false"})
    assert verdict.allowed and verdict.warnings == ()


# --- annotation values ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, value", [("proxy-body-size", "15r"), ("proxy-read-timeout", "50k"),
                                         ("proxy-next-upstream-tries", "888888")])
def test_an_invalid_value_that_does_not_control_access_is_allowed_with_a_warning(web, name, value):
    verdict = review(web, annotations={name: value})
    assert verdict.allowed
    [warning] = verdict.warnings
    assert warning.startswith(f"annotation {PREFIX}/{name} value {value!r}: must be ")
    assert warning.endswith("; ignored, its default applies")


@pytest.mark.parametrize("annotations", [{"auth-url": "https://invalid..auth.url"}, {"limit-rps": "many"},
                                         {"auth-type": "basic"}])
def test_an_invalid_access_control_value_is_denied(web, annotations):
    message = denied(review(web, annotations=annotations))
    name = next(iter(annotations))
    assert message.startswith(f"annotation {PREFIX}/{name}") and "its paths answer 503 until it is fixed" in message


def test_an_access_control_annotation_pyngress_does_not_know_is_denied(web):
    message = denied(review(web, annotations={"auth-made-up-option": "any"}))
    assert "controls access, and pyngress does not implement it yet" in message


def test_an_annotation_above_the_risk_level_is_denied(web):
    web.configmap({"annotations-risk-level": "Medium"})
    message = denied(review(web, annotations={"mirror-target": "https://mirror.example.com$request_uri"}))
    assert message == (f"annotation {PREFIX}/mirror-target value 'https://mirror.example.com$request_uri': its risk "
                       "level HIGH is above the ConfigMap's annotations-risk-level MEDIUM; remove the annotation or "
                       "raise annotations-risk-level")


def test_snippets_are_denied_unless_the_configmap_allows_them(web):
    snippet = {"configuration-snippet": 'more_set_headers "X-Snippet: yes";'}
    assert "snippet annotations are disabled" in denied(review(web, annotations=snippet))
    web.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    assert review(web, "allowed", annotations=snippet).allowed


def test_a_blocked_word_is_denied(web):
    web.configmap({"annotation-value-word-blocklist": "load_module,serviceaccount"})
    message = denied(review(web, annotations={"upstream-vhost": "serviceaccount.example.com"}))
    assert "'serviceaccount', a word the ConfigMap's annotation-value-word-blocklist forbids" in message


# --- hosts and paths --------------------------------------------------------------------------------------

def test_a_host_and_path_another_ingress_defines_is_denied_naming_it(web):
    web.app("first", ns="team-a", host="app.example.com")
    web.service("web", ns="team-b")
    message = denied(review(web, ns="team-b", paths=[("/", "Prefix", "web", 80), ("/b", "Prefix", "web", 80)]))
    assert message == ("host app.example.com prefix path / is already defined in Ingress team-a/first; serve it "
                       "from that Ingress, or use another host or path")


def test_the_oldest_definer_is_named_and_an_older_newcomer_is_denied_too(web):
    web.app("second", host="app.example.com", created=web.timestamp(20))
    web.app("third", host="app.example.com", created=web.timestamp(30))
    # Older than both (an update of an old Ingress taking a path): ingress-nginx denies it too.
    message = denied(review(web, created=web.timestamp(10)))
    assert "is already defined in Ingress default/second;" in message


def test_updating_the_same_ingress_or_other_paths_and_path_types_are_no_conflict(web):
    existing = web.app("site", host="app.example.com")
    reviewer = reviewer_of(web)
    assert reviewer.review(existing, operation="UPDATE").allowed
    for paths in ([("/other", "Prefix", "web", 80)], [("/", "Exact", "web", 80)]):
        candidate = web.ingress("candidate", paths=paths)
        assert reviewer.review(candidate).allowed, paths


def test_a_trailing_slash_and_implementation_specific_meet_the_same_prefix(web):
    web.ingress("site", paths=[("/api/", "Prefix", "web", 80)])
    assert "prefix path /api is already defined in Ingress default/site" in denied(
        review(web, paths=[("/api", "ImplementationSpecific", "web", 80)]))


def test_a_canary_on_its_main_ingress_path_is_allowed_and_without_one_denied(web):
    web.app("main", host="app.example.com")
    assert review(web, "canary", annotations={"canary": "true", "canary-weight": "10"}).allowed
    message = denied(review(web, "lonely", host="nowhere.example.com", annotations={"canary": "true"}))
    assert "a canary needs a main Ingress in its namespace with the same host and path" in message


def test_a_host_another_namespace_owns_is_denied_with_strict_host_ownership(web):
    web.app("site", ns="a", host="shop.example.com", created=web.timestamp(1))
    web.service("web", ns="b")
    newcomer = dict(ns="b", host="shop.example.com", paths=[("/b", "Prefix", "web", 80)])
    verdict = review(web, **newcomer)
    assert verdict.allowed, "paths of other namespaces are served by default, as in ingress-nginx"
    web.configmap({"strict-host-ownership": "true"})
    message = denied(review(web, "candidate2", **newcomer))
    assert message.startswith("shop.example.com (owned by Ingress a/site, older) belongs to another namespace")


def test_settings_of_a_host_another_namespace_owns_are_allowed_with_a_warning(web):
    web.app("site", ns="a", host="shop.example.com", created=web.timestamp(1))
    web.service("web", ns="b")
    verdict = review(web, ns="b", host="shop.example.com", paths=[("/b", "Prefix", "web", 80)],
                     annotations={"app-root": "/start"})
    assert verdict.allowed
    assert verdict.warnings == ("app-root is ignored for host shop.example.com: the host belongs to namespace a (its "
                                "oldest Ingress is a/site), and only that namespace's Ingresses set a host's "
                                "certificate, redirects and server-level settings",)


def test_a_passthrough_ingress_on_a_routed_host_is_denied(web):
    web.app("site", host="app.example.com", created=web.timestamp(1))
    message = denied(review(web, paths=[("/tls", "Prefix", "web", 80)], annotations={"ssl-passthrough": "true"},
                            settings={"enable_ssl_passthrough": True}))
    assert message.startswith("ssl-passthrough refused: app.example.com (Ingress default/site) is already routed")


def test_a_catch_all_is_denied_with_disable_catch_all(web):
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    message = denied(review(web, rules=[], default_backend=backend, settings={"disable_catch_all": True}))
    assert "--disable-catch-all; remove spec.defaultBackend" in message
    assert review(web, "other", rules=[], default_backend=backend).allowed


# --- Services, Secrets, location settings -----------------------------------------------------------------

def test_a_missing_service_is_allowed_with_a_warning(web):
    verdict = review(web, paths=[("/", "Prefix", "later", 80)])
    assert verdict.allowed and verdict.warnings == ("Service default/later not found; requests for it answer 503",)


@pytest.mark.parametrize("external_name", ["localhost", "127.0.0.1", "169.254.169.254"])
def test_an_external_name_service_naming_the_node_is_denied(web, external_name):
    web.service("meta", type="ExternalName", external_name=external_name, ports=(("http", 80),))
    message = denied(review(web, paths=[("/", "Prefix", "meta", 80)]))
    assert message.startswith(f"Service default/meta has type ExternalName with externalName '{external_name}', "
                              "which names the node itself")


def test_a_missing_or_foreign_auth_secret_is_denied_and_a_good_one_allowed(web):
    basic = {"auth-type": "basic", "auth-secret": "users"}
    assert "auth-secret default/users was not found" in denied(review(web, annotations=basic))
    web.tls_secret("users", ns="other", type="Opaque", data={"auth": HTPASSWD})
    message = denied(review(web, "second", annotations={**basic, "auth-secret": "other/users"}))
    assert "auth-secret other/users is in another namespace" in message
    web.tls_secret("users", type="Opaque", data={"auth": HTPASSWD})
    assert review(web, "third", annotations=basic).allowed


def test_a_missing_client_ca_secret_is_denied(web):
    message = denied(review(web, annotations={"auth-tls-secret": "default/ca"}))
    assert message == "auth-tls-secret default/ca: Secret not found; create it with the CA certificates in ca.crt"


@pytest.mark.parametrize("path", ["/api/(v1", "/a)"])
def test_a_regex_path_pcre_refuses_is_denied(web, path):
    message = denied(review(web, paths=[(path, "ImplementationSpecific", "web", 80)],
                            annotations={"use-regex": "true"}))
    assert f"host app.example.com path {path!r}: {path!r} is not a valid regular expression: PCRE" in message


def test_proxy_buffers_nginx_would_refuse_together_are_denied(web):
    message = denied(review(web, annotations={"proxy-buffer-size": "64k", "proxy-buffers-number": "2",
                                              "proxy-busy-buffers-size": "1m"}))
    assert message.startswith(f"annotation {PREFIX}/proxy-busy-buffers-size value '1m': ")


# --- IngressNightmare ---------------------------------------------------------------------------------------

SSL_ENGINE = f"\nssl_engine {LEAK_FILE};\n"
NIGHTMARE = {
    # CVE-2025-1097, CVE-2025-1098 and CVE-2025-24514: a value that closes its directive and adds ssl_engine,
    # which nginx -t in ingress-nginx's webhook loaded (CVE-2025-1974).
    "auth-tls-match-cn": {"auth-tls-secret": "default/ca", "auth-tls-match-cn": "CN=a;" + SSL_ENGINE + "#"},
    "auth-url": {"auth-url": "http://auth.example.com/verify;" + SSL_ENGINE + "#"},
    "mirror-target": {"mirror-target": "http://mirror.example.com/$request_uri;" + SSL_ENGINE + "#"},
    "mirror-host": {"mirror-target": "http://mirror.example.com/", "mirror-host": "m.example.com;" + SSL_ENGINE},
    "configuration-snippet": {"configuration-snippet": f"ssl_engine {LEAK_FILE};"},
}


@pytest.fixture
def ca(web):
    web.tls_secret("ca", type="Opaque", data={"ca.crt": base64.b64encode(CA_CERT.encode()).decode()})
    return web


@pytest.mark.parametrize("target", sorted(NIGHTMARE))
def test_ingress_nightmare_payloads_are_denied_naming_the_annotation(ca, target):
    message = denied(review(ca, annotations=NIGHTMARE[target]))
    assert message.startswith(f"annotation {PREFIX}/{target} value ")


@pytest.mark.parametrize("payload", [p for p in PAYLOADS if p.advisory in ("CVE-2025-1097", "CVE-2025-1098",
                                                                          "CVE-2025-24514")], ids=lambda p: p.id)
def test_the_corpus_breakouts_of_those_advisories_are_all_denied(ca, payload):
    annotations = {k.removeprefix(PREFIX + "/"): v.replace("tenant/ca", "default/ca")
                   for k, v in payload.annotations.items()}
    verdict = review(ca, annotations=annotations)
    assert not verdict.allowed, payload
    assert not any(breakout in warning for warning in verdict.warnings for breakout in BREAKOUTS)


def test_a_set_aside_value_without_configuration_syntax_stays_a_warning(web):
    verdict = review(web, annotations={"mirror-target": "ftp://mirror.example.com/"})
    assert verdict.allowed and len(verdict.warnings) == 1


# --- following the store --------------------------------------------------------------------------------------

def test_changes_to_the_store_are_followed(web):
    first = web.app("first", host="app.example.com")
    candidate = web.ingress("candidate", host="app.example.com")
    del web.store[object_key(candidate)]
    reviewer = reviewer_of(web)
    assert not reviewer.review(candidate).allowed
    reviewer.apply_change(object_key(first), None)
    assert reviewer.review(candidate).allowed
    reviewer.apply_change(object_key(first), first)
    assert not reviewer.review(candidate).allowed
    # first moves to another path: no conflict any more
    moved = {**first, "spec": {**first["spec"], "rules": [web.rule("app.example.com", ("/x", "Prefix", "web", 80))]}}
    reviewer.apply_change(object_key(first), moved)
    assert reviewer.review(candidate).allowed


def test_configmap_and_ingress_class_changes_are_followed(web):
    snippet = web.ingress("snippet", annotations={"configuration-snippet": "return 200;"})
    del web.store[object_key(snippet)]
    configmap = web.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    del web.store[object_key(configmap)]
    reviewer = reviewer_of(web)
    assert not reviewer.review(snippet).allowed
    reviewer.apply_change(object_key(configmap), configmap)
    assert reviewer.review(snippet).allowed
    [ours] = [key for key in web.store if key.startswith("IngressClass/")]
    reviewer.apply_change(ours, None)  # the class is gone: the Ingress is no longer ours
    assert reviewer.review({**snippet, "metadata": {**snippet["metadata"], "annotations": {
        f"{PREFIX}/configuration-snippet": "anything", f"{PREFIX}/auth-made-up-option": "any"}}}).allowed


def test_a_secret_change_reaches_the_reviewed_ingress_and_its_neighbours(web):
    """A Secret decides the reviewed Ingress's own plan (auth-secret) and its neighbours' (the owner of a host
    holds it only while its client CA loads): a change to one is seen by the next review."""
    users = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "users", "namespace": "b"},
             "data": {"auth": HTPASSWD}}
    ca = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "ca", "namespace": "a"},
          "data": {"ca.crt": base64.b64encode(CA_CERT.encode()).decode()}}
    web.service("web", ns="a")
    web.ingress("site", ns="a", host="shop.example.com", created=web.timestamp(1),
                annotations={"auth-tls-secret": "a/ca"})
    web.service("web", ns="b")
    candidate = web.ingress("candidate", ns="b", host="shop.example.com", paths=[("/b", "Prefix", "web", 80)],
                            annotations={"auth-type": "basic", "auth-secret": "users", "app-root": "/start"})
    del web.store[object_key(candidate)]
    reviewer = reviewer_of(web)
    assert "auth-secret b/users was not found" in denied(reviewer.review(candidate))
    reviewer.apply_change(object_key(users), users)
    assert reviewer.review(candidate) == Verdict(allowed=True)  # a/site has no usable CA: b owns the host
    reviewer.apply_change(object_key(ca), ca)
    verdict = reviewer.review(candidate)
    assert verdict.allowed and verdict.warnings[0].startswith("app-root is ignored for host shop.example.com")


# --- the same decisions as the syncer's model --------------------------------------------------------------

SAME_AS_THE_MODEL = [
    {}, {"proxy-read-timeout": "50k"}, {"auth-url": "https://invalid..auth.url"}, {"configuration-snippet": "x"},
    {"use-regex": "true", "rewrite-target": "/$1"}, {"auth-type": "basic", "auth-secret": "missing"},
    {"canary": "true"}, {"app-root": "/start", "server-alias": "alias.example.com"}, {"unknown-thing": "1"},
]


@pytest.mark.parametrize("annotations", SAME_AS_THE_MODEL)
def test_errors_and_warnings_are_the_model_s_own_for_the_ingress(web, annotations):
    web.app("site", ns="other", host="app.example.com", created=web.timestamp(1))
    web.service("web", ns="other")
    candidate = web.ingress("candidate", host="app.example.com", paths=[("/c", "Prefix", "web", 80)],
                            annotations=annotations)
    model = web.build()
    mine = [p for p in model.problems if p.object == "Ingress default/candidate"]
    store = {k: v for k, v in web.store.items() if k != object_key(candidate)}
    reviewer = Reviewer(web.settings)
    reviewer.replace_store(store)
    verdict = reviewer.review(candidate)
    assert list(verdict.errors) == [p.message for p in mine if p.is_error]
    assert list(verdict.warnings) == [p.message for p in mine if not p.is_error]
