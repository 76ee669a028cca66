"""ConfigMap ssl-dh-param: the Secret ("NAMESPACE/NAME", key dhparam.pem) holding the Diffie-Hellman parameters
of the DHE ciphers, as ingress-nginx reads it. nginx reads them once per configuration load (ssl_dhparam),
from a root-only file named by their digest, so a changed Secret reloads nginx. Parameters OpenSSL cannot
read are refused, and nginx keeps OpenSSL's own groups.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from typing import Any, Mapping

from .openssl import dh_params_problem

KEY = "dhparam.pem"


@dataclass(frozen=True)
class DhParam:
    file_name: str  # in NginxPaths.ssl_dir
    content: bytes


def dh_param(store: Mapping[str, dict[str, Any]], reference: str) -> tuple[DhParam | None, str | None]:
    """The parameters of the Secret `reference`, or why they cannot be used."""
    namespace, _, name = reference.partition("/")
    secret = store.get(f"Secret/{namespace}/{name}")
    if secret is None:
        return None, (f"Secret {reference} not found (pyngress reads Opaque Secrets in the namespaces it watches, "
                      "and in the controller ConfigMap's); OpenSSL's own DH groups are used meanwhile")
    encoded = (secret.get("data") or {}).get(KEY)
    try:
        content = base64.b64decode(encoded if isinstance(encoded, str) else "", validate=True)
    except (binascii.Error, ValueError):
        content = b""
    if not content:
        return None, f"Secret {reference} has no {KEY} (base64 PEM DH parameters, as `openssl dhparam` writes them)"
    problem = dh_params_problem(content)
    if problem:
        return None, f"Secret {reference} key {KEY}: {problem}; make them with `openssl dhparam 2048`"
    return DhParam(f"dhparam-{hashlib.sha256(content).hexdigest()[:16]}.pem", content), None
