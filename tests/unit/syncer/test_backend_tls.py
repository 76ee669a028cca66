"""proxy-ssl-*: the validators, the Secret → files, and what nginx.conf gets."""
import base64
import subprocess

import pytest

from services.nginxconf.render import render
from services.syncer.annotations import ANNOTATIONS
from services.syncer.annotations.base import InvalidValue
from services.syncer.model.auth_secrets import DENIED_PROFILE


def pem_pair(tmp_path, name):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}"],
                   cwd=tmp_path, check=True, capture_output=True)
    return (tmp_path / f"{name}.crt").read_bytes(), (tmp_path / f"{name}.key").read_bytes()


def add_secret(cluster, data, name="backend-tls", ns="default"):
    cluster.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name, "namespace": ns},
                 "data": {k: base64.b64encode(v).decode() for k, v in data.items()}})


def route_profile(model):
    name = model.routes["app.example.com"].prefix["/"].profile
    return next(p for p in model.config.profiles if p.name == name)


@pytest.mark.parametrize("name, value", [
    ("proxy-ssl-protocols", "SSLv3"), ("proxy-ssl-protocols", "TLSv1.2;"), ("proxy-ssl-ciphers", "!aNULL"),
    ("proxy-ssl-name", "$host"), ("proxy-ssl-verify", "true"), ("proxy-ssl-secret", "a/b/c"),
])
def test_refused_values(name, value):
    with pytest.raises(InvalidValue):
        ANNOTATIONS[name].validate(value)


def test_the_secret_becomes_files_and_directives(cluster, tmp_path):
    ca, _ = pem_pair(tmp_path, "ca")
    cert, key = pem_pair(tmp_path, "client")
    add_secret(cluster, {"ca.crt": ca, "tls.crt": cert, "tls.key": key})
    cluster.app(annotations={"backend-protocol": "HTTPS", "proxy-ssl-secret": "backend-tls", "proxy-ssl-verify": "on",
                             "proxy-ssl-protocols": "TLSv1.2 TLSv1.3", "proxy-ssl-name": "api.internal"})
    model = cluster.build()
    tls = route_profile(model).backend_tls
    assert model.ssl_files[tls.ca_file] == ca and model.ssl_files[tls.cert_file] == cert + b"\n" + key
    conf = render(model.config)
    for line in (f'proxy_ssl_trusted_certificate "/var/lib/pyngress/nginx/ssl/{tls.ca_file}";',
                 'proxy_ssl_verify on;', 'proxy_ssl_protocols "TLSv1.2" "TLSv1.3";', 'proxy_ssl_name "api.internal";',
                 f'proxy_ssl_certificate_key "/var/lib/pyngress/nginx/ssl/{tls.cert_file}";',
                 "proxy_ssl_server_name on;"):
        assert line in conf, line
    assert "proxy_ssl_name $host;" not in conf  # the annotation's name replaces the HTTPS default
    assert key.decode() not in conf and "ssl_files" not in repr(model)


@pytest.mark.parametrize("data, reference, problem", [
    ({}, "backend-tls", "the Secret has no ca.crt"),
    ({"ca.crt": b"junk"}, "backend-tls", "ca.crt does not load as PEM certificates"),
    (None, "missing", "Secret not found"),
    ("ca-only", "other/backend-tls", "is in another namespace"),
    ("mismatch", "backend-tls", "tls.crt and tls.key do not load as a certificate and its key"),
    ("half", "backend-tls", "tls.crt and tls.key go together"),
])
def test_an_unusable_secret_denies_the_paths(cluster, tmp_path, data, reference, problem):
    ca, ca_key = pem_pair(tmp_path, "ca")
    cert, _ = pem_pair(tmp_path, "client")
    named = {"ca-only": {"ca.crt": ca}, "mismatch": {"ca.crt": ca, "tls.crt": cert, "tls.key": ca_key},
             "half": {"ca.crt": ca, "tls.crt": cert}}
    contents = named[data] if isinstance(data, str) else data
    if contents is not None:
        add_secret(cluster, contents, ns=reference.split("/")[0] if "/" in reference else "default")
    cluster.app(annotations={"backend-protocol": "HTTPS", "proxy-ssl-secret": reference})
    model = cluster.build()
    assert route_profile(model) == DENIED_PROFILE
    [rejection] = cluster.rejections(model)
    assert problem in rejection and "its paths answer 503" in rejection


def test_options_without_the_secret_are_ignored_with_a_warning(cluster):
    cluster.app(annotations={"proxy-ssl-verify": "on"})
    assert cluster.warnings(cluster.build()) == ["warning: Ingress default/web: annotation nginx.ingress.kubernetes.io/"
                                                 "proxy-ssl-verify has no effect without proxy-ssl-secret (as in "
                                                 "ingress-nginx); ignored"]
