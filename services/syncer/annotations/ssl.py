"""ssl-redirect, force-ssl-redirect, ssl-passthrough: host-level TLS behaviour (HostRoutes and passthrough);
ssl-ciphers and ssl-prefer-server-ciphers: the TLS handshake of the Ingress's hosts.

As in ingress-nginx, the ciphers are nginx's ssl_ciphers and ssl_prefer_server_ciphers in the server block of
the Ingress's hosts: such a host gets a server block of its own (as for server-snippet; the oldest Ingress of
the host's namespace that sets one of them decides), which nginx picks by the TLS SNI before OpenSSL chooses
the cipher. Like nginx's directive, ssl-ciphers applies to TLS 1.2 and older; TLS 1.3 suites are the
ConfigMap's.
"""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, HOST_OWNER_ONLY, IngressAnnotations, Risk, SERVER_BLOCK_OWNER, Scope
from .validators import boolean, is_true, ssl_ciphers


ANNOTATIONS = (
    Annotation("ssl-redirect", reloads=False, validate=boolean, risk=Risk.LOW, default="true",
               doc="Redirect http to https (308) when the host has a certificate; default from the ConfigMap (true).",
               scope=Scope.HOST,
               differs=HOST_OWNER_ONLY),
    Annotation("force-ssl-redirect", reloads=False, validate=boolean, risk=Risk.LOW, default="false",
               doc="Redirect http to https even when the host has no certificate of its own.", scope=Scope.HOST,
               differs=HOST_OWNER_ONLY),
    Annotation("ssl-passthrough", reloads=False, validate=boolean, risk=Risk.MEDIUM, default="false",
               doc="Pass TLS connections for the Ingress's hosts untouched to the backend, chosen by SNI "
               "(needs --enable-ssl-passthrough).", scope=Scope.HOST),
    Annotation("ssl-ciphers", validate=ssl_ciphers, risk=Risk.LOW,
               doc="The TLS 1.2 ciphers (an OpenSSL list) of the Ingress's hosts; default: the ConfigMap's "
                   "ssl-ciphers.", scope=Scope.HOST,
               differs=SERVER_BLOCK_OWNER),
    Annotation("ssl-prefer-server-ciphers", validate=boolean, risk=Risk.LOW,
               doc="true: the server's cipher order wins on the Ingress's hosts; false: the client's; default: "
                   "the ConfigMap's.", scope=Scope.HOST,
               differs=SERVER_BLOCK_OWNER),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "ssl-redirect" in values:
        parsed.ssl_redirect = is_true(values["ssl-redirect"])
    if "force-ssl-redirect" in values:
        parsed.force_ssl_redirect = is_true(values["force-ssl-redirect"])
    parsed.ssl_passthrough = is_true(values.get("ssl-passthrough", "false"))
    parsed.ssl_ciphers = values.get("ssl-ciphers")
    if "ssl-prefer-server-ciphers" in values:
        parsed.ssl_prefer_server_ciphers = "on" if is_true(values["ssl-prefer-server-ciphers"]) else "off"
