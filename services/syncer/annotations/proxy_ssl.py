"""proxy-ssl-*: TLS from nginx to an HTTPS (or GRPCS) backend, checked against a CA and with a client
certificate, as ingress-nginx does.

proxy-ssl-secret names the Secret (NAME or NAMESPACE/NAME) whose ca.crt verifies the backend and whose
tls.crt/tls.key, when present, nginx presents to it; without it the other proxy-ssl-* annotations have no
effect (a warning says so), as in ingress-nginx. proxy-ssl-verify (off), -verify-depth (1), -ciphers
(DEFAULT), -protocols (TLSv1.2), -name and -server-name keep ingress-nginx's defaults. The Secret is
resolved per Ingress (services/syncer/model/backend_tls.py); one that cannot be used denies the paths (503).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk
from .validators import HOSTNAME, integer, one_of, ssl_ciphers

_SECRET = re.compile(r"(?:[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?/)?[a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?")
_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
_NAME = re.compile(HOSTNAME)


def _secret(value: str) -> str:
    if not _SECRET.fullmatch(value):
        raise InvalidValue("must name a Secret as NAME or NAMESPACE/NAME, such as backend-ca or team-a/backend-ca")
    return value


def _protocols(value: str) -> str:
    words = value.split()
    if not words or any(word not in _PROTOCOLS for word in words):
        raise InvalidValue(f"must be protocols separated by spaces, from {', '.join(_PROTOCOLS)}")
    return " ".join(dict.fromkeys(words))


def _name(value: str) -> str:
    if len(value) > 253 or not _NAME.fullmatch(value):
        raise InvalidValue("must be the host name the backend's certificate names, such as api.internal")
    return value


ANNOTATIONS = (
    Annotation("proxy-ssl-secret", validate=_secret, risk=Risk.MEDIUM,
               doc="Secret with ca.crt (verifies the backend) and optionally tls.crt/tls.key (shown to it)."),
    Annotation("proxy-ssl-verify", validate=one_of("on", "off"), risk=Risk.LOW, default="off",
               doc="Verify the backend's certificate against proxy-ssl-secret's ca.crt (default off)."),
    Annotation("proxy-ssl-verify-depth", validate=integer(0, 100), risk=Risk.LOW, default="1",
               doc="Longest certificate chain accepted from the backend (default 1)."),
    Annotation("proxy-ssl-ciphers", validate=ssl_ciphers, risk=Risk.MEDIUM,
               doc="OpenSSL ciphers offered to the backend (default DEFAULT)."),
    Annotation("proxy-ssl-protocols", validate=_protocols, risk=Risk.LOW,
               doc="TLS versions offered to the backend (default TLSv1.2)."),
    Annotation("proxy-ssl-name", validate=_name, risk=Risk.MEDIUM,
               doc="The name the backend's certificate is verified against, and its SNI with proxy-ssl-server-name."),
    Annotation("proxy-ssl-server-name", validate=one_of("on", "off"), risk=Risk.LOW, default="off",
               doc="Send proxy-ssl-name (or the host) as SNI to the backend."),
)


@dataclass(frozen=True, kw_only=True)
class BackendTlsSpec:
    """What the annotations ask for; the Secret is looked up per Ingress (namespace None: the Ingress's)."""
    namespace: str | None
    secret: str
    verify: str = "off"
    depth: int = 1
    ciphers: str = "DEFAULT"
    protocols: str = "TLSv1.2"
    name: str | None = None
    server_name: str | None = None


_OPTIONS = tuple(a.name for a in ANNOTATIONS if a.name != "proxy-ssl-secret")


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "proxy-ssl-secret" not in values:
        for name in _OPTIONS:
            if name in values:
                parsed.warn(name, "has no effect without proxy-ssl-secret (as in ingress-nginx); ignored")
        return
    namespace, _, secret = values["proxy-ssl-secret"].rpartition("/")
    parsed.backend_tls = BackendTlsSpec(
        namespace=namespace or None, secret=secret, verify=values.get("proxy-ssl-verify", "off"),
        depth=int(values.get("proxy-ssl-verify-depth", "1")), ciphers=values.get("proxy-ssl-ciphers", "DEFAULT"),
        protocols=values.get("proxy-ssl-protocols", "TLSv1.2"), name=values.get("proxy-ssl-name"),
        server_name=values.get("proxy-ssl-server-name"))
