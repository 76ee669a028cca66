"""auth-tls-* annotations: values, the CA Secret they name, and what reaches the routes table."""
import base64

import pytest

from services.nginxconf.prefix import make_self_signed
from services.syncer.model.types import ClientAuth

from .test_annotations import PREFIX

CA = make_self_signed("/CN=unit CA", ("ca.unit.example",)).decode()
CA_CERT = CA[:CA.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")]
CRL = "-----BEGIN X509 CRL-----\nMIIBbDBW\n-----END X509 CRL-----\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def ca_secret(cluster, name="ca", ns="default", **data: str):
    cluster.tls_secret(name, ns=ns, type="Opaque", data={k.replace("_", "."): b64(v) for k, v in data.items()})


@pytest.mark.parametrize("annotations, auth", [
    ({}, ClientAuth(ca=CA_CERT, crl=None, verify="on", depth=1, error_page=None, pass_certificate=False,
                    match_cn=None)),
    ({"auth-tls-verify-client": "optional_no_ca", "auth-tls-verify-depth": "3",
      "auth-tls-error-page": "https://login.example.com/denied", "auth-tls-pass-certificate-to-upstream": "true",
      "auth-tls-match-cn": "CN=(a|b)$"},
     ClientAuth(ca=CA_CERT, crl=None, verify="optional_no_ca", depth=3, error_page="https://login.example.com/denied",
                pass_certificate=True, match_cn="CN=(a|b)$")),
    ({"auth-tls-verify-client": "OFF", "auth-tls-error-page": "/denied"},
     ClientAuth(ca=CA_CERT, crl=None, verify="off", depth=1, error_page="/denied", pass_certificate=False,
                match_cn=None)),
])
def test_the_ingress_routes_carry_its_client_check(cluster, annotations, auth):
    ca_secret(cluster, ca_crt=CA_CERT)
    cluster.app(annotations={"auth-tls-secret": "default/ca", **annotations})
    cluster.app("other", host="other.example.com")
    model = cluster.build()
    assert cluster.rejections(model) == []
    assert model.routes["app.example.com"].client_auth == {"default/web": auth}
    assert model.routes_json()["app.example.com"]["client_auth"]["default/web"]["verify"] == auth.verify
    assert model.routes["other.example.com"].client_auth == {} and "client_auth" not in model.routes_json()["other.example.com"]


def test_a_crl_in_the_secret_is_checked_too(cluster):
    ca_secret(cluster, ca_crt=CA_CERT, ca_crl=CRL)
    cluster.app(annotations={"auth-tls-secret": "default/ca"})
    assert cluster.build().routes["app.example.com"].client_auth["default/web"].crl == CRL


@pytest.mark.parametrize("name, value, reason", [
    ("auth-tls-secret", "ca", "must be namespace/name of a Secret holding ca.crt"),
    ("auth-tls-secret", "default/ca; deny", "must be namespace/name of a Secret holding ca.crt"),
    ("auth-tls-verify-client", "maybe", "must be one of on, off, optional, optional_no_ca"),
    ("auth-tls-verify-depth", "-1", "must be a whole number from 0 to 100"),
    ("auth-tls-error-page", "javascript:alert(1)", "must be a URL such as"),
    ("auth-tls-error-page", "https://a.example.com/$uri", "must be a URL such as"),
    ("auth-tls-pass-certificate-to-upstream", "yes", 'must be "true" or "false"'),
    ("auth-tls-match-cn", "client-a", 'must be "CN=" followed by'),
    ("auth-tls-match-cn", "CN=(a", "is not a valid regular expression"),
])
def test_bad_values_reject_the_ingress(cluster, name, value, reason):
    ca_secret(cluster, ca_crt=CA_CERT)
    cluster.app(annotations={"auth-tls-secret": "default/ca", name: value})
    [problem] = cluster.rejections(cluster.build())
    assert problem.startswith(f"Ingress default/web: annotation {PREFIX}/{name} value {value!r}: ") and reason in problem


@pytest.mark.parametrize("secret, reason", [
    (None, "auth-tls-secret default/ca: Secret not found; create it with the CA certificates in ca.crt"),
    ({"tls_crt": CA_CERT}, "the Secret has no ca.crt; add the CA certificates there"),
    ({"ca_crt": "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"},
     "ca.crt does not load as PEM certificates"),
    ({"ca_crt": CA_CERT, "ca_crl": "a CRL"}, "ca.crl is not PEM CRLs"),
])
def test_an_unusable_ca_secret_rejects_the_ingress_never_serving_it_open(cluster, secret, reason):
    if secret is not None:
        ca_secret(cluster, **secret)
    cluster.app(annotations={"auth-tls-secret": "default/ca"})
    model = cluster.build()
    assert model.routes == {}
    [problem] = cluster.rejections(model)
    assert reason in problem


def test_a_secret_of_another_namespace_is_refused(cluster):
    ca_secret(cluster, ns="other", ca_crt=CA_CERT)
    cluster.app(annotations={"auth-tls-secret": "other/ca"})
    [problem] = cluster.rejections(cluster.build())
    assert problem.endswith("auth-tls-secret other/ca: the Secret must be in the Ingress's namespace default; copy "
                            "the CA there")


def test_options_without_a_secret_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"auth-tls-verify-client": "optional"})
    model = cluster.build()
    assert model.routes["app.example.com"].client_auth == {}
    assert model.problem_lines() == [f"warning: Ingress default/web: annotation {PREFIX}/auth-tls-verify-client has "
                                     "no effect without auth-tls-secret; ignored"]


def test_only_the_routes_of_the_ingress_with_client_auth_are_checked(cluster):
    ca_secret(cluster, ca_crt=CA_CERT)
    cluster.app(annotations={"auth-tls-secret": "default/ca"})
    cluster.ingress("api", host="app.example.com", paths=(("/api", "Prefix", "web", 80),))
    model = cluster.build()
    table = model.routes_json()["app.example.com"]
    assert list(table["client_auth"]) == ["default/web"]
    assert dict(table["prefix"])["/api"]["ingress"] == "default/api"
