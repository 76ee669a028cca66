"""Security first, attacks 3 and 4, through the whole controller with real TLS clients: another tenant's
TLS section or passthrough Ingress must not take over a host that an older Ingress serves."""
from services.nginxconf.prefix import FAKE_CERTIFICATE_CN
from tests.support import k8s
from tests.support.net import wait_for

from .conftest import BACKEND_IP
from .pki import https_get, served_certificate, tls_secret

PASSTHROUGH = {"nginx.ingress.kubernetes.io/ssl-passthrough": "true"}
FAKE = FAKE_CERTIFICATE_CN


def test_another_tenants_tls_section_changes_nothing_on_the_victims_host(tls_stage, ca, fake_certificate):
    stage = tls_stage
    port = stage.controller.https_port
    victim_host = "shop.victim.example"
    stage.cluster.apply(*stage.backend("VICTIM", namespace="victim"),
                        tls_secret("shop-cert", ca.issue(victim_host, organization="victim"), namespace="victim"),
                        k8s.ingress("shop", [k8s.rule(victim_host, ("/", "Prefix", "victim", 80))], "victim",
                                    tls=[{"hosts": [victim_host], "secretName": "shop-cert"}],
                                    created="2024-05-01T00:00:00Z"))
    wait_for(lambda: served_certificate(port, victim_host, [ca.cert_path]).get("organizationName") == "victim",
             15, what="the victim's certificate served")
    assert stage.controller.get("/", victim_host).status_code == 308

    # An older Ingress of the attacker lists the victim's host in its TLS section (no rule for it), and a
    # newer one does the same beside a host of its own.
    stolen = tls_secret("stolen", ca.issue(victim_host, organization="attacker"), namespace="attacker")
    stage.cluster.apply(*stage.backend("ATTACKER", namespace="attacker"), stolen,
                        k8s.ingress("older", [k8s.rule("own.attacker.example", ("/", "Prefix", "attacker", 80))],
                                    "attacker", tls=[{"hosts": [victim_host], "secretName": "stolen"}],
                                    created="2020-01-01T00:00:00Z"),
                        k8s.ingress("newer", [k8s.rule("other.attacker.example", ("/", "Prefix", "attacker", 80))],
                                    "attacker", tls=[{"hosts": [victim_host], "secretName": "stolen"}],
                                    created="2025-01-01T00:00:00Z"))
    stage.expect("other.attacker.example", "/", "ATTACKER")
    assert served_certificate(port, victim_host, [ca.cert_path]).get("organizationName") == "victim"
    assert https_get(port, victim_host, "/", [ca.cert_path]).status == 200

    # A victim host without TLS keeps being served over plain HTTP, without redirect or HSTS.
    plain = "plain.victim.example"
    stage.cluster.apply(k8s.ingress("plain", [k8s.rule(plain, ("/", "Prefix", "victim", 80))], "victim"),
                        k8s.ingress("grab", [k8s.rule("grab.attacker.example", ("/", "Prefix", "attacker", 80))],
                                    "attacker", tls=[{"hosts": [plain], "secretName": "stolen"}]))
    stage.expect(plain, "/", "VICTIM")
    stage.expect("grab.attacker.example", "/", "ATTACKER")
    assert stage.controller.get("/", plain).status_code == 200
    response = https_get(port, plain, "/", [fake_certificate])
    assert "strict-transport-security" not in response.headers
    assert served_certificate(port, plain, [fake_certificate], check_hostname=False)["commonName"] == FAKE


def test_the_older_owner_keeps_its_host_against_a_newer_passthrough_ingress(passthrough_stage, ca, tls_backend):
    stage = passthrough_stage
    port = stage.controller.https_port
    bank = "bank.tls.example"
    stage.cluster.apply(*stage.backend("BANK", namespace="bank"),
                        tls_secret("bank-cert", ca.issue(bank), namespace="bank"),
                        k8s.ingress("bank", [k8s.rule(bank, ("/", "Prefix", "bank", 80))], "bank",
                                    tls=[{"hosts": [bank], "secretName": "bank-cert"}],
                                    created="2024-01-01T00:00:00Z"))
    wait_for(lambda: served_certificate(port, bank, [ca.cert_path]).get("commonName") == bank, 15,
             what="the bank's certificate served by nginx")

    stage.cluster.apply(k8s.service("thief", port=443, namespace="thief"),
                        k8s.endpoint_slice("thief", [BACKEND_IP], tls_backend, namespace="thief"),
                        k8s.ingress("thief", [k8s.rule(bank, ("/", "Prefix", "thief", 443))], "thief",
                                    annotations=PASSTHROUGH, created="2025-01-01T00:00:00Z"))
    log = stage.controller.log_path
    wait_for(lambda: "Ingress thief/thief: ssl-passthrough refused" in log.read_text(errors="replace"), 15,
             what="the newer passthrough Ingress refused in the controller's log")
    assert served_certificate(port, bank, [ca.cert_path])["commonName"] == bank
    response = https_get(port, bank, "/", [ca.cert_path])
    assert response.status == 200 and b'"backend": "BANK"' in response.body
