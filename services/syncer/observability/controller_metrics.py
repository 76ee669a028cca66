"""ingress-nginx's metrics about the applied configuration: certificate expiry and details per TLS host, and
orphaned Ingresses (a route whose Service is missing or has no ready endpoint).

Names, label names and help texts are ingress-nginx's (internal/ingress/metric/collectors/controller.go).
"""
from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from typing import Mapping

from services.syncer.model.openssl import decode_certificate
from services.syncer.model.types import Model

from . import exposition

PREFIX = "nginx_ingress_controller_"

# DER encodings of the SubjectPublicKeyInfo algorithm identifiers, as Go's x509.PublicKeyAlgorithm names them.
# Signature algorithm identifiers are other OIDs, so finding one of these in a certificate names its key.
_KEY_ALGORITHMS = (
    (bytes.fromhex("06092a864886f70d010101"), "RSA"),
    (bytes.fromhex("06072a8648ce3d0201"), "ECDSA"),
    (bytes.fromhex("06032b6570"), "Ed25519"),
    (bytes.fromhex("06072a8648ce380401"), "DSA"),
)


@dataclass(frozen=True)
class CertificateFacts:
    expires: float               # seconds since 1970
    serial: str                  # decimal, as Go's big.Int prints it
    issuer_common_name: str
    issuer_organization: str
    issuer_serial: str           # the issuer name's serialNumber attribute (usually empty)
    key_algorithm: str

    @property
    def identifier(self) -> str:
        """ingress-nginx's SSLCert.Identifier()."""
        return f"{self.issuer_serial}-{self.serial}"


# Bounded as the certificates table's PEMs are (model/tls.py): at 10,000 certificates a smaller cache parsed every
# one of them again at each scrape, in the event loop.
@functools.lru_cache(maxsize=1 << 17)
def certificate_facts(cert_pem: str) -> CertificateFacts | None:
    """The first certificate of a PEM bundle; None when it cannot be read."""
    begin = cert_pem.find("-----BEGIN CERTIFICATE-----")
    end = cert_pem.find("-----END CERTIFICATE-----", begin)
    if begin < 0 or end < 0:
        return None
    first = cert_pem[begin:end + len("-----END CERTIFICATE-----")] + "\n"
    try:
        decoded = decode_certificate(first.encode())
        der = ssl.PEM_cert_to_DER_cert(first)
    except (ssl.SSLError, OSError, ValueError):
        return None
    issuer = {key: value for rdn in decoded.get("issuer", ()) for key, value in rdn}
    algorithm = next((name for oid, name in _KEY_ALGORITHMS if oid in der), "Unknown")
    return CertificateFacts(
        expires=float(ssl.cert_time_to_seconds(decoded["notAfter"])),
        serial=str(int(decoded.get("serialNumber", "0"), 16)),
        issuer_common_name=issuer.get("commonName", ""), issuer_organization=issuer.get("organizationName", ""),
        issuer_serial=issuer.get("serialNumber", ""), key_algorithm=algorithm)


def certificate_lines(model: Model, controller_class: str) -> list[str]:
    """ssl_expire_time_seconds and ssl_certificate_info for each host served with an Ingress's certificate."""
    expiry, info = [], []
    certs = model.certificates.get("certs", {})
    for host, ref in sorted(model.tls_secrets.items()):
        pem = certs.get(ref, {}).get("cert")
        facts = certificate_facts(pem) if pem else None
        if facts is None:
            continue
        namespace, _, name = ref.partition("/")
        labels = {"namespace": namespace, "class": controller_class, "host": host, "secret_name": name,
                  "identifier": facts.identifier}
        expiry.append((labels, facts.expires))
        info.append(({**labels, "issuer_organization": facts.issuer_organization,
                      "issuer_common_name": facts.issuer_common_name, "serial_number": facts.serial,
                      "public_key_algorithm": facts.key_algorithm}, 1))
    return (exposition.family(PREFIX + "ssl_expire_time_seconds",
                              "Number of seconds since 1970 to the SSL Certificate expire. An example to check if "
                              "this certificate will expire in 10 days is: \"nginx_ingress_controller_ssl_expire_"
                              "time_seconds < (time() + (10 * 24 * 3600))\"", "gauge", expiry)
            + exposition.family(PREFIX + "ssl_certificate_info", "Hold all labels associated to a certificate",
                                "gauge", info))


def orphan_lines(current: set[tuple[str, str]], ever: set[tuple[str, str]],
                 const_labels: Mapping[str, str]) -> list[str]:
    """1 for the orphaned Ingresses, 0 for those that were orphaned before (as ingress-nginx resets them)."""
    samples = []
    for ingress, kind in sorted(ever):
        namespace, _, name = ingress.partition("/")
        samples.append(({**const_labels, "namespace": namespace, "ingress": name, "type": kind},
                        1 if (ingress, kind) in current else 0))
    return exposition.family(PREFIX + "orphan_ingress",
                             "Gauge reporting status of ingress orphanity, 1 indicates orphaned ingress. 'namespace' "
                             "is the string used to identify namespace of ingress, 'ingress' for ingress name and "
                             "'type' for 'no-service' or 'no-endpoint' of orphanity", "gauge", samples)
