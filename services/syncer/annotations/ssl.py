"""ssl-redirect, force-ssl-redirect, ssl-passthrough: host-level TLS behaviour (HostRoutes and passthrough).

ssl-ciphers and ssl-prefer-server-ciphers are refused: every host is served by one nginx TLS server (the
certificate is chosen in Lua by SNI), and OpenSSL fixes the cipher list per server before the SNI is known.
The controller ConfigMap's ssl-ciphers and ssl-protocols set them for all hosts.
"""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk, Scope, Unsupported
from .validators import boolean, is_true


def _global_only(value: str) -> str:
    raise Unsupported("TLS ciphers cannot differ per Ingress in pyngress (all hosts share one TLS server); "
                       "remove the annotation and set ssl-ciphers in the controller ConfigMap instead")

ANNOTATIONS = (
    Annotation("ssl-redirect", reloads=False, validate=boolean, risk=Risk.LOW, default="true",
               doc="Redirect http to https (308) when the host has a certificate; default from the ConfigMap (true).",
               scope=Scope.HOST),
    Annotation("force-ssl-redirect", reloads=False, validate=boolean, risk=Risk.LOW, default="false",
               doc="Redirect http to https even when the host has no certificate of its own.", scope=Scope.HOST),
    Annotation("ssl-passthrough", reloads=False, validate=boolean, risk=Risk.MEDIUM, default="false",
               doc="Pass TLS connections for the Ingress's hosts untouched to the backend, chosen by SNI "
               "(needs --enable-ssl-passthrough).", scope=Scope.HOST),
    Annotation("ssl-ciphers", validate=_global_only, risk=Risk.LOW,
               doc="Refused: ciphers are set for all hosts by the ConfigMap."),
    Annotation("ssl-prefer-server-ciphers", validate=_global_only, risk=Risk.LOW,
               doc="Refused: set for all hosts (on) by the controller."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "ssl-redirect" in values:
        parsed.ssl_redirect = is_true(values["ssl-redirect"])
    if "force-ssl-redirect" in values:
        parsed.force_ssl_redirect = is_true(values["force-ssl-redirect"])
    parsed.ssl_passthrough = is_true(values.get("ssl-passthrough", "false"))
