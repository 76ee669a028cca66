"""ssl-ciphers and ssl-prefer-server-ciphers through the whole controller, with real TLS 1.2 clients: the
ciphers of an Ingress's hosts are those it names, other hosts keep the ConfigMap's (the cases of ingress-nginx's
e2e: annotations/sslciphers.go, whose cipher strings are used here too)."""
import socket
import ssl

import pytest

from tests.support import k8s
from tests.support.net import wait_for

from .pki import https_get, tls_secret

PREFIX = "nginx.ingress.kubernetes.io"
# The test CA issues P-256 keys: the TLS 1.2 ciphers that can serve them are ECDSA ones.
AES128 = "ECDHE-ECDSA-AES128-GCM-SHA256"
AES256 = "ECDHE-ECDSA-AES256-GCM-SHA384"


def negotiated(port: int, sni: str, ciphers: str) -> str:
    """The cipher a TLS 1.2 handshake for `sni` offering only `ciphers` (in that order) gets; raises ssl.SSLError
    when the server accepts none of them."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(ciphers)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname=sni) as tls:
            return tls.cipher()[0]


def refused(port: int, sni: str, ciphers: str) -> bool:
    try:
        negotiated(port, sni, ciphers)
    except ssl.SSLError:
        return True
    return False


@pytest.fixture(scope="module")
def hosts(tls_stage, ca):
    stage = tls_stage
    names = ("strict.ciphers.example", "open.ciphers.example", "prefer.ciphers.example", "client.ciphers.example",
             "legacy.ciphers.example")
    stage.cluster.apply(*stage.backend("CIPHERS"), tls_secret("ciphers-cert", ca.issue("ciphers", names)))

    def ingress(name: str, **annotations: str) -> dict:
        host = f"{name}.ciphers.example"
        return k8s.ingress(f"ciphers-{name}", [k8s.rule(host, ("/something", "Prefix", "ciphers", 80))],
                           tls=[{"hosts": [host], "secretName": "ciphers-cert"}],
                           annotations={f"{PREFIX}/{k}": v for k, v in annotations.items()})

    stage.cluster.apply(
        ingress("strict", **{"ssl-ciphers": AES256}),
        ingress("open"),
        ingress("prefer", **{"ssl-ciphers": f"{AES256}:{AES128}", "ssl-prefer-server-ciphers": "true"}),
        ingress("client", **{"ssl-ciphers": f"{AES256}:{AES128}", "ssl-prefer-server-ciphers": "false"}),
        ingress("legacy", **{"ssl-ciphers": "ALL:!aNULL:!EXPORT56:RC4+RSA:+HIGH:+MEDIUM:+LOW:+SSLv2:+EXP",
                             "ssl-prefer-server-ciphers": "false"}))
    port = stage.controller.https_port
    wait_for(lambda: refused(port, "strict.ciphers.example", AES128), 20, what="the strict host's cipher list")
    for name in names:
        wait_for(lambda: https_get(port, name, "/something").status == 200, 20, what=f"{name} served")
    return stage


def test_a_client_offering_only_a_cipher_outside_the_list_is_refused(hosts):
    port = hosts.controller.https_port
    assert refused(port, "strict.ciphers.example", AES128)
    assert negotiated(port, "strict.ciphers.example", AES256) == AES256
    # Another host on the same listener keeps the ConfigMap's ciphers.
    assert negotiated(port, "open.ciphers.example", AES128) == AES128
    assert https_get(port, "strict.ciphers.example", "/something").status == 200


def test_prefer_server_ciphers_decides_whose_order_wins(hosts):
    port = hosts.controller.https_port
    client_order = f"{AES128}:{AES256}"
    assert negotiated(port, "prefer.ciphers.example", client_order) == AES256
    assert negotiated(port, "client.ciphers.example", client_order) == AES128


def test_ingress_nginx_s_own_cipher_string_serves(hosts):
    port = hosts.controller.https_port
    assert negotiated(port, "legacy.ciphers.example", AES128) == AES128
    assert https_get(port, "legacy.ciphers.example", "/something").status == 200
