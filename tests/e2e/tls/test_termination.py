"""TLS termination through the whole controller (manifests → watcher → syncer → nginx), with real TLS
clients: certificates by SNI, the default and fake certificates, rotation without a reload, HTTPS
redirects and HSTS as ingress-nginx applies them."""
import json
import socket
import ssl

from services.nginxconf.prefix import FAKE_CERTIFICATE_CN
from tests.support import k8s
from tests.support.net import wait_for

from .conftest import BACKEND_IP, CONFIGMAP
from .pki import https_get, s_client_subject, served_certificate, tls_secret

FAKE = FAKE_CERTIFICATE_CN
RELOADS = "nginx_ingress_controller_success"
PREFIX = "nginx.ingress.kubernetes.io"


def common_name(stage, sni, trusted, check_hostname=True):
    return served_certificate(stage.controller.https_port, sni, trusted, check_hostname)["commonName"]


def wait_served(stage, sni, trusted, want, check_hostname=True, field="commonName"):
    port = stage.controller.https_port
    wait_for(lambda: served_certificate(port, sni, trusted, check_hostname).get(field) == want, 15,
             what=f"{field} {want!r} served for SNI {sni}")


def test_each_sni_gets_its_certificate_and_unknown_names_the_fake_one(tls_stage, ca, fake_certificate):
    stage = tls_stage
    stage.cluster.apply(*stage.backend("TLS-A"),
                        tls_secret("a-cert", ca.issue("a.tls.example")),
                        tls_secret("multi-cert", ca.issue("b.tls.example", ("b.tls.example", "c.tls.example"))),
                        tls_secret("wild-cert", ca.issue("*.wild.tls.example")))
    hosts = ("a.tls.example", "b.tls.example", "c.tls.example", "x.wild.tls.example")
    stage.cluster.apply(k8s.ingress("sni", [k8s.rule(h, ("/", "Prefix", "tls-a", 80)) for h in hosts], tls=[
        {"hosts": ["a.tls.example"], "secretName": "a-cert"},
        {"hosts": ["b.tls.example"], "secretName": "multi-cert"},  # c.tls.example: by the certificate's SAN
        {"hosts": ["*.wild.tls.example"], "secretName": "wild-cert"}]))
    trusted = [ca.cert_path]
    wait_served(stage, "a.tls.example", trusted, "a.tls.example")

    served = {sni: common_name(stage, sni, trusted) for sni in hosts}
    assert served == {"a.tls.example": "a.tls.example", "b.tls.example": "b.tls.example",
                      "c.tls.example": "b.tls.example", "x.wild.tls.example": "*.wild.tls.example"}
    assert common_name(stage, "unknown.tls.example", [fake_certificate], check_hostname=False) == FAKE
    assert common_name(stage, None, [fake_certificate], check_hostname=False) == FAKE
    assert "CN = a.tls.example" in s_client_subject(stage.controller.https_port, "a.tls.example")
    response = https_get(stage.controller.https_port, "c.tls.example", "/x", trusted)
    assert response.status == 200 and b'"backend": "TLS-A"' in response.body
    assert b'"x-forwarded-proto": "https"' in response.body


def test_the_default_ssl_certificate_replaces_the_fake_one_without_a_reload(tls_stage, ca, fake_certificate):
    stage = tls_stage
    stage.cluster.apply(*stage.backend("TLS-D"),
                        k8s.ingress("plain", [k8s.rule("plain.tls.example", ("/", "Prefix", "tls-d", 80))]))
    stage.expect("plain.tls.example", "/", "TLS-D")
    reloads = stage.controller.metric(RELOADS)
    default = tls_secret("default-cert", ca.issue("default.tls.example"))

    stage.cluster.apply(default)
    wait_served(stage, "plain.tls.example", [ca.cert_path], "default.tls.example", check_hostname=False)
    assert common_name(stage, "unknown.tls.example", [ca.cert_path], check_hostname=False) == "default.tls.example"
    assert stage.controller.metric(RELOADS) == reloads
    # A host without TLS of its own is not redirected and gets no HSTS, even with a default certificate.
    assert stage.controller.get("/", "plain.tls.example").status_code == 200
    assert "strict-transport-security" not in https_get(stage.controller.https_port, "plain.tls.example",
                                                        trusted=[ca.cert_path]).headers

    stage.cluster.delete(default)
    wait_served(stage, "unknown.tls.example", [fake_certificate], FAKE, check_hostname=False)


def test_a_rotated_certificate_is_served_without_a_reload(tls_stage, ca):
    stage = tls_stage
    stage.cluster.apply(*stage.backend("TLS-R"),
                        tls_secret("rot-cert", ca.issue("rot.tls.example", organization="v1")),
                        k8s.ingress("rot", [k8s.rule("rot.tls.example", ("/", "Prefix", "tls-r", 80))],
                                    tls=[{"hosts": ["rot.tls.example"], "secretName": "rot-cert"}]))
    wait_served(stage, "rot.tls.example", [ca.cert_path], "v1", field="organizationName")
    reloads = stage.controller.metric(RELOADS)

    stage.cluster.apply(tls_secret("rot-cert", ca.issue("rot.tls.example", organization="v2")))

    wait_served(stage, "rot.tls.example", [ca.cert_path], "v2", field="organizationName")
    assert stage.controller.metric(RELOADS) == reloads


def test_a_key_that_does_not_match_is_reported_and_its_host_gets_the_default(tls_stage, ca, fake_certificate):
    """As ingress-nginx: the host stays a TLS host (redirect, HSTS) and HTTPS answers with the default
    certificate; the same for a Secret that does not exist."""
    stage = tls_stage
    mismatched = ca.issue("bad.tls.example")
    mismatched = type(mismatched)(mismatched.cert, ca.issue("other.tls.example").key)
    stage.cluster.apply(*stage.backend("TLS-B"), tls_secret("bad-cert", mismatched),
                        k8s.ingress("bad", [k8s.rule("bad.tls.example", ("/", "Prefix", "tls-b", 80)),
                                            k8s.rule("missing.tls.example", ("/", "Prefix", "tls-b", 80))],
                                    tls=[{"hosts": ["bad.tls.example"], "secretName": "bad-cert"},
                                         {"hosts": ["missing.tls.example"], "secretName": "no-such-secret"}]))
    stage.expect("bad.tls.example", "/", "308")

    log = stage.controller.log_path
    wait_for(lambda: "TLS Secret default/bad-cert holds a tls.crt and tls.key that OpenSSL cannot serve"
             in log.read_text(errors="replace"), 10, what="the mismatched key in the controller's log")
    for host in ("bad.tls.example", "missing.tls.example"):
        redirect = stage.controller.get("/x?y=1", host)
        assert (redirect.status_code, redirect.headers["location"]) == (308, f"https://{host}/x?y=1")
        assert common_name(stage, host, [fake_certificate], check_hostname=False) == FAKE
        response = https_get(stage.controller.https_port, host, "/", [fake_certificate])
        assert response.status == 200 and b'"backend": "TLS-B"' in response.body
        assert response.headers["strict-transport-security"].startswith("max-age=")


def test_redirects_and_hsts_follow_annotations_and_the_configmap(tls_stage, ca):
    stage = tls_stage
    port = stage.controller.https_port
    stage.cluster.apply(
        *stage.backend("TLS-H"),
        tls_secret("secure-cert", ca.issue("secure.tls.example", ("secure.tls.example", "optout.tls.example"))),
        k8s.ingress("secure", [k8s.rule("secure.tls.example", ("/", "Prefix", "tls-h", 80))],
                    tls=[{"hosts": ["secure.tls.example"], "secretName": "secure-cert"}]),
        k8s.ingress("optout", [k8s.rule("optout.tls.example", ("/", "Prefix", "tls-h", 80))],
                    annotations={"nginx.ingress.kubernetes.io/ssl-redirect": "false"},
                    tls=[{"hosts": ["optout.tls.example"], "secretName": "secure-cert"}]),
        k8s.ingress("forced", [k8s.rule("forced.tls.example", ("/", "Prefix", "tls-h", 80))],
                    annotations={"nginx.ingress.kubernetes.io/force-ssl-redirect": "true"}))
    stage.expect("optout.tls.example", "/", "TLS-H")
    wait_for(lambda: stage.controller.get("/a?b=1", "secure.tls.example").status_code == 308, 10,
             what="secure.tls.example redirected")
    # Each Ingress is its own file: the last one may reach nginx one sync later.
    wait_for(lambda: stage.controller.get("/", "forced.tls.example").status_code == 308, 10,
             what="forced.tls.example redirected (no certificate of its own)")

    redirect = stage.controller.get("/a?b=1", "secure.tls.example")
    assert redirect.headers["location"] == "https://secure.tls.example/a?b=1"  # no port, as ingress-nginx
    assert stage.controller.get("/.well-known/acme-challenge/t", "secure.tls.example").status_code == 200
    secure = https_get(port, "secure.tls.example", "/a", [ca.cert_path])
    assert secure.status == 200
    assert secure.headers["strict-transport-security"] == "max-age=31536000; includeSubDomains"
    assert "strict-transport-security" not in stage.controller.get("/", "optout.tls.example").headers

    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"namespace": CONFIGMAP.split("/")[0], "name": CONFIGMAP.split("/")[1]},
                 "data": {"hsts-max-age": "100", "hsts-include-subdomains": "false", "hsts-preload": "true",
                          "ssl-redirect": "false"}}
    stage.cluster.apply(configmap)
    try:
        wait_for(lambda: https_get(port, "secure.tls.example", "/", [ca.cert_path]).headers.get(
            "strict-transport-security") == "max-age=100; preload", 10, what="HSTS from the ConfigMap")
        assert stage.controller.get("/", "secure.tls.example").status_code == 200
        assert stage.controller.get("/", "forced.tls.example").status_code == 308  # the annotation still forces
    finally:
        stage.cluster.delete(configmap)
    wait_for(lambda: stage.controller.get("/", "secure.tls.example").status_code == 308, 10,
             what="the ConfigMap's defaults back")


def test_an_https_backend_with_cors_behind_a_tls_host(tls_stage, ca, tls_backend):
    stage = tls_stage
    port = stage.controller.https_port
    stage.cluster.apply(
        k8s.service("https-app", port=443), k8s.endpoint_slice("https-app", [BACKEND_IP], tls_backend),
        tls_secret("api-cert", ca.issue("api.tls.example")),
        k8s.ingress("api", [k8s.rule("api.tls.example", ("/", "Prefix", "https-app", 443))],
                    tls=[{"hosts": ["api.tls.example"], "secretName": "api-cert"}],
                    annotations={f"{PREFIX}/backend-protocol": "HTTPS", f"{PREFIX}/enable-cors": "true",
                                 f"{PREFIX}/cors-allow-origin": "https://app.tls.example"}))
    wait_served(stage, "api.tls.example", [ca.cert_path], "api.tls.example")
    # The certificate is pushed at once; the route's profile may wait for its reload (--sync-rate-limit).
    wait_for(lambda: https_get(port, "api.tls.example", "/data", [ca.cert_path]).status == 200, 10,
             what="the route with its profile")

    response = https_get(port, "api.tls.example", "/data", [ca.cert_path], headers={"Origin": "https://app.tls.example"})
    seen = json.loads(response.body)
    assert (seen["backend"], seen["sni"]) == ("tls-backend", "api.tls.example")  # nginx → backend over TLS
    assert response.headers["access-control-allow-origin"] == "https://app.tls.example"
    preflight = https_get(port, "api.tls.example", "/data", [ca.cert_path], method="OPTIONS",
                          headers={"Origin": "https://app.tls.example", "Access-Control-Request-Method": "PUT"})
    assert preflight.status == 204 and preflight.body == b""
    assert preflight.headers["access-control-allow-methods"] == "GET,PUT,POST,DELETE,PATCH,OPTIONS"


def test_configmap_ssl_protocols_apply_to_every_host(tls_stage, ca):
    stage = tls_stage
    stage.cluster.apply(tls_secret("proto-cert", ca.issue("proto.tls.example")),
                        k8s.ingress("proto", [k8s.rule("proto.tls.example", ("/", "Prefix", "tls-d", 80))],
                                    tls=[{"hosts": ["proto.tls.example"], "secretName": "proto-cert"}]))
    wait_served(stage, "proto.tls.example", [ca.cert_path], "proto.tls.example")
    assert handshake_version(stage, ssl.TLSVersion.TLSv1_2) == "TLSv1.2"

    configmap = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"namespace": CONFIGMAP.split("/")[0], "name": CONFIGMAP.split("/")[1]},
                 "data": {"ssl-protocols": "TLSv1.3"}}
    stage.cluster.apply(configmap)
    try:
        wait_for(lambda: _refused(stage), 15, what="TLS 1.2 refused after ssl-protocols TLSv1.3")
        assert handshake_version(stage, ssl.TLSVersion.TLSv1_3) == "TLSv1.3"
    finally:
        stage.cluster.delete(configmap)
    wait_for(lambda: handshake_version(stage, ssl.TLSVersion.TLSv1_2) == "TLSv1.2", 15, what="TLS 1.2 back")


def handshake_version(stage, highest: ssl.TLSVersion) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.maximum_version = highest
    with socket.create_connection(("127.0.0.1", stage.controller.https_port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname="proto.tls.example") as tls:
            return tls.version()


def _refused(stage) -> bool:
    try:
        handshake_version(stage, ssl.TLSVersion.TLSv1_2)
    except ssl.SSLError:
        return True
    return False
