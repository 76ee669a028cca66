"""proxy-ssl-secret → the files nginx verifies the backend with (ca.crt) and shows it (tls.crt + tls.key).

The Secret must be in the Ingress's namespace unless the ConfigMap's allow-cross-namespace-resources says
otherwise, as in ingress-nginx; its ca.crt must load as PEM certificates, and tls.crt/tls.key (both or
neither) as a certificate and its key. The files are named by a digest of their content and read by nginx's
master when it loads its configuration: a changed Secret makes a new profile, so one reload.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
from typing import Any, Mapping

from services.nginxconf.config import BackendTls

from ..annotations.proxy_ssl import BackendTlsSpec
from .openssl import certificate_problem


class BackendTlsRejected(ValueError):
    """proxy-ssl-secret names something unusable; the message says what to change."""


def _decoded(data: Mapping[str, Any], key: str) -> bytes | None:
    raw = data.get(key)
    if raw is None:
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise BackendTlsRejected(f"{key} is not base64") from None


def _file_name(kind: str, content: bytes) -> str:
    return f"{kind}-{hashlib.sha256(content).hexdigest()[:16]}.pem"


def resolve_backend_tls(spec: BackendTlsSpec, *, namespace: str, allow_cross_namespace: bool,
                        secrets: Mapping[tuple[str, str], Mapping[str, Any]]) -> tuple[BackendTls, dict[str, bytes]]:
    """The profile's BackendTls and the files it names (name → content); raises BackendTlsRejected."""
    secret_namespace = spec.namespace or namespace
    where = f"proxy-ssl-secret {secret_namespace}/{spec.secret}"
    if secret_namespace != namespace and not allow_cross_namespace:
        raise BackendTlsRejected(f"{where} is in another namespace, which the ConfigMap's "
                                 "allow-cross-namespace-resources does not allow; copy it to the Ingress's namespace")
    secret = secrets.get((secret_namespace, spec.secret))
    if secret is None:
        raise BackendTlsRejected(f"{where}: Secret not found; create it with the backend's CA in ca.crt")
    data = secret.get("data") or {}
    try:
        ca, cert, key = (_decoded(data, name) for name in ("ca.crt", "tls.crt", "tls.key"))
    except BackendTlsRejected as err:
        raise BackendTlsRejected(f"{where}: {err}") from None
    if not ca:
        raise BackendTlsRejected(f"{where}: the Secret has no ca.crt; add the CA that signed the backend's "
                                 "certificate")
    try:
        ssl.create_default_context(cadata=ca.decode("ascii"))
    except (ssl.SSLError, ValueError, UnicodeDecodeError) as err:
        raise BackendTlsRejected(f"{where}: ca.crt does not load as PEM certificates ({err}); fix it") from None
    files = {_file_name("proxy-ca", ca): ca}
    cert_file = None
    if cert or key:
        if not (cert and key):
            raise BackendTlsRejected(f"{where}: tls.crt and tls.key go together; add the missing one or remove both")
        problem = certificate_problem(cert.decode("ascii", "replace"), key.decode("ascii", "replace"))
        if problem:
            raise BackendTlsRejected(f"{where}: tls.crt and tls.key do not load as a certificate and its key: "
                                     f"{problem}")
        cert_file = _file_name("proxy-client", cert + b"\n" + key)
        files[cert_file] = cert + b"\n" + key
    tls = BackendTls(ca_file=next(iter(files)), cert_file=cert_file, verify=spec.verify, depth=spec.depth,
                     ciphers=spec.ciphers, protocols=spec.protocols, name=spec.name, server_name=spec.server_name)
    return tls, files
