"""ssl-redirect, force-ssl-redirect, ssl-passthrough: host-level TLS behaviour (HostRoutes and passthrough)."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .validators import boolean, is_true

ANNOTATIONS = (
    Annotation("ssl-redirect", boolean, Risk.LOW,
               "Redirect http to https (308) when the host has a certificate; default from the ConfigMap (true)."),
    Annotation("force-ssl-redirect", boolean, Risk.LOW,
               "Redirect http to https even when the host has no certificate of its own."),
    Annotation("ssl-passthrough", boolean, Risk.MEDIUM,
               "Pass TLS connections for the Ingress's hosts untouched to the backend, chosen by SNI "
               "(needs --enable-ssl-passthrough)."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "ssl-redirect" in values:
        parsed.ssl_redirect = is_true(values["ssl-redirect"])
    if "force-ssl-redirect" in values:
        parsed.force_ssl_redirect = is_true(values["force-ssl-redirect"])
    parsed.ssl_passthrough = is_true(values.get("ssl-passthrough", "false"))
