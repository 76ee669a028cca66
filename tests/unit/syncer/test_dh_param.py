"""ConfigMap ssl-dh-param: the Secret's dhparam.pem → the file nginx.conf names, or why not."""
import base64
import subprocess

import pytest

from services.nginxconf.render import render

PARAMS = subprocess.run(["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe2048"],
                        check=True, capture_output=True).stdout


def with_secret(cluster, data):
    cluster.configmap({"ssl-dh-param": "ingress/dhparam"})
    cluster.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": "dhparam", "namespace": "ingress"},
                 "data": data})
    return cluster.build()


def test_the_parameters_become_a_file_nginx_reads(cluster):
    model = with_secret(cluster, {"dhparam.pem": base64.b64encode(PARAMS).decode()})
    assert model.dh_param.content == PARAMS and model.config.server.ssl_dh_param == model.dh_param.file_name
    assert f'ssl_dhparam "/var/lib/pyngress/nginx/ssl/{model.dh_param.file_name}";' in render(model.config)
    assert cluster.rejections(model) == []


@pytest.mark.parametrize("data, problem", [
    (None, "Secret ingress/dhparam not found"),
    ({}, "Secret ingress/dhparam has no dhparam.pem"),
    ({"dhparam.pem": "not base64!"}, "has no dhparam.pem"),
    ({"dhparam.pem": base64.b64encode(b"-----BEGIN DH PARAMETERS-----\nAAAA\n").decode()}, "OpenSSL cannot read it"),
])
def test_unusable_parameters_are_reported_and_left_out(cluster, data, problem):
    if data is None:
        cluster.configmap({"ssl-dh-param": "ingress/dhparam"})
        model = cluster.build()
    else:
        model = with_secret(cluster, data)
    assert model.dh_param is None and "ssl_dhparam" not in render(model.config)
    [rejection] = cluster.rejections(model)
    assert rejection.startswith("ConfigMap ingress/ingress-nginx-controller key ssl-dh-param: ") and problem in rejection
