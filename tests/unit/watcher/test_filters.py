from services.common.settings import Settings
from services.watcher.filters import LAST_APPLIED_ANNOTATION, keep, slim


def obj(kind, name, namespace=None, **extra):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"kind": kind, "metadata": meta, **extra}


def test_routing_kinds_are_always_kept():
    settings = Settings()
    for kind in ("Ingress", "Service", "EndpointSlice"):
        assert keep(obj(kind, "a", "team"), settings)
    assert keep(obj("IngressClass", "nginx"), settings)


def test_watch_namespace_limits_namespaced_kinds_only():
    settings = Settings.from_flags(watch_namespace="team")
    assert keep(obj("Ingress", "a", "team"), settings)
    assert not keep(obj("Ingress", "a", "other"), settings)
    assert not keep(obj("Service", "a"), settings)  # no namespace means "default"
    assert keep(obj("IngressClass", "nginx"), settings)


def test_secrets_only_tls_opaque_or_the_default_certificate():
    settings = Settings.from_flags(default_ssl_certificate="ingress/default-cert", watch_namespace="team")
    assert keep(obj("Secret", "tls", "team", type="kubernetes.io/tls"), settings)
    assert not keep(obj("Secret", "token", "team", type="kubernetes.io/service-account-token"), settings)
    assert not keep(obj("Secret", "release", "team", type="helm.sh/release.v1"), settings)
    # Opaque (also without a type, as a manifest may write it): basic authentication's htpasswd Secrets.
    assert keep(obj("Secret", "basic-auth", "team", type="Opaque"), settings)
    assert keep(obj("Secret", "basic-auth", "team"), settings)
    assert not keep(obj("Secret", "basic-auth", "other", type="Opaque"), settings)
    assert not keep(obj("Secret", "tls", "other", type="kubernetes.io/tls"), settings)
    # Named by a flag: kept whatever its type and whatever --watch-namespace says.
    assert keep(obj("Secret", "default-cert", "ingress", type="Opaque"), settings)


def test_client_certificate_cas_are_kept():
    settings = Settings.from_flags(watch_namespace="team")
    generic = obj("Secret", "client-ca", "team", type="Opaque", data={"ca.crt": "Q0E=", "ca.crl": "Q1JM", "password": "eA=="})
    assert keep(generic, settings) and keep(obj("Secret", "untyped-ca", "team", data={"ca.crt": "Q0E="}), settings)
    # Kept whole: an auth-map Secret (basic authentication) has one key per user, whatever its name.
    assert slim(generic)["data"] == generic["data"]
    token = obj("Secret", "token", "team", type="kubernetes.io/service-account-token", data={"ca.crt": "Q0E=", "token": "dA=="})
    assert not keep(token, settings)
    tls = obj("Secret", "tls", "team", type="kubernetes.io/tls", data={"tls.crt": "Yw==", "tls.key": "aw==", "ca.crt": "Q0E="})
    assert slim(tls)["data"] == tls["data"]


def test_configmaps_named_by_flags_beside_the_controller_configmap_and_in_watched_namespaces():
    settings = Settings.from_flags(configmap="ingress/config", tcp_services_configmap="system/tcp",
                                   udp_services_configmap="system/udp", watch_namespace="team")
    for namespace, name in (("ingress", "config"), ("system", "tcp"), ("system", "udp")):
        assert keep(obj("ConfigMap", name, namespace), settings)
    assert keep(obj("ConfigMap", "headers", "ingress"), settings)  # add-headers / proxy-set-headers name them
    assert keep(obj("ConfigMap", "auth-headers", "team"), settings)  # auth-proxy-set-headers names them
    assert not keep(obj("ConfigMap", "kube-root-ca.crt", "team"), settings)
    assert not keep(obj("ConfigMap", "other", "system"), settings)
    assert keep(obj("ConfigMap", "config", "ingress"), Settings())
    assert not keep(obj("ConfigMap", "kube-root-ca.crt", "ingress"), Settings())


def test_only_our_own_node():
    assert keep(obj("Node", "node-1"), Settings.from_flags(node_name="node-1"))
    assert not keep(obj("Node", "node-2"), Settings.from_flags(node_name="node-1"))
    assert not keep(obj("Node", "node-1"), Settings())


def test_other_kinds_are_dropped():
    assert not keep(obj("Deployment", "a", "default"), Settings())
    assert not keep(obj("Namespace", "a"), Settings())


def test_slim_drops_managed_fields_and_last_applied_without_touching_the_input():
    original = obj("Ingress", "a", "default", spec={"rules": []})
    original["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    original["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: "{...}", "keep/me": "1"}
    slimmed = slim(original)
    assert slimmed == {"kind": "Ingress", "spec": {"rules": []},
                       "metadata": {"name": "a", "namespace": "default", "annotations": {"keep/me": "1"}}}
    assert "managedFields" in original["metadata"]
    assert LAST_APPLIED_ANNOTATION in original["metadata"]["annotations"]


def test_slim_removes_annotations_left_empty_and_returns_lean_objects_as_they_are():
    only_last_applied = obj("Service", "a")
    only_last_applied["metadata"]["annotations"] = {LAST_APPLIED_ANNOTATION: "{}"}
    assert slim(only_last_applied)["metadata"] == {"name": "a"}
    lean = obj("Service", "b")
    assert slim(lean) is lean
