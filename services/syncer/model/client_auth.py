"""auth-tls-secret → the CA (and CRL) the router verifies client certificates against, per Ingress.

The Secret must be in the Ingress's own namespace (ingress-nginx takes any namespace; a tenant naming
another namespace's Secret is refused here rather than given what it holds). Its ca.crt must hold PEM
certificates that OpenSSL loads; ca.crl, when present, PEM CRLs. A Secret that is missing or unusable
rejects the Ingress: its paths are never served without the client check it asked for.
"""
from __future__ import annotations

import base64
import binascii
import re
import ssl
from typing import Any, Mapping

from ..annotations.base import ClientAuthSpec
from .types import ClientAuth

_CRL = re.compile(r"(?:-----BEGIN X509 CRL-----\r?\n[A-Za-z0-9+/=\r\n]+-----END X509 CRL-----\s*)+")


class ClientAuthRejected(ValueError):
    """auth-tls-secret names something unusable; the message says what to change."""


def _decoded(data: Mapping[str, Any], key: str) -> str | None:
    raw = data.get(key)
    if raw is None:
        return None
    try:
        return base64.b64decode(raw, validate=True).decode("ascii")
    except (binascii.Error, TypeError, ValueError, UnicodeDecodeError):
        raise ClientAuthRejected(f"{key} is not base64 of PEM text") from None


def resolve_client_auth(spec: ClientAuthSpec, *, namespace: str,
                        secrets: Mapping[tuple[str, str], Mapping[str, Any]]) -> ClientAuth:
    """The verified form of `spec` for an Ingress in `namespace`; raises ClientAuthRejected."""
    ref = f"{spec.secret_namespace}/{spec.secret_name}"
    where = f"auth-tls-secret {ref}"
    if spec.secret_namespace != namespace:
        raise ClientAuthRejected(f"{where}: the Secret must be in the Ingress's namespace {namespace}; copy the CA "
                                 "there")
    secret = secrets.get((spec.secret_namespace, spec.secret_name))
    if secret is None:
        raise ClientAuthRejected(f"{where}: Secret not found; create it with the CA certificates in ca.crt")
    data = secret.get("data") or {}
    try:
        ca, crl = _decoded(data, "ca.crt"), _decoded(data, "ca.crl")
    except ClientAuthRejected as err:
        raise ClientAuthRejected(f"{where}: {err}") from None
    if not ca:
        raise ClientAuthRejected(f"{where}: the Secret has no ca.crt; add the CA certificates there")
    try:
        ssl.create_default_context(cadata=ca)
    except (ssl.SSLError, ValueError) as err:
        raise ClientAuthRejected(f"{where}: ca.crt does not load as PEM certificates ({err}); fix it") from None
    if crl is not None and not _CRL.fullmatch(crl.strip() + "\n"):
        raise ClientAuthRejected(f"{where}: ca.crl is not PEM CRLs (-----BEGIN X509 CRL-----); fix or remove it")
    return ClientAuth(ca=ca, crl=crl or None, verify=spec.verify, depth=spec.depth, error_page=spec.error_page,
                      pass_certificate=spec.pass_certificate, match_cn=spec.match_cn)
