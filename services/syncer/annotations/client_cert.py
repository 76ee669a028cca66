"""auth-tls-*: client certificates (mutual TLS), verified per request for the Ingress's own paths.

All hosts share one nginx TLS server, so nginx's ssl_verify_client (one setting per server) cannot differ
by host. Instead the handshake asks for a certificate when the SNI's host has client authentication
(templates/lua/pyngress/certificates.lua), and the router checks the certificate against the CA of the
Ingress whose path the request takes (templates/lua/pyngress/client_auth.lua): a certificate accepted
for another host, a resumed session or a different SNI never counts for this Ingress's paths.

Values: auth-tls-secret is "namespace/name" of a Secret with ca.crt (and optionally ca.crl) in the
Ingress's own namespace; auth-tls-verify-client on (default) | off | optional | optional_no_ca;
auth-tls-verify-depth (default 1); auth-tls-error-page, where a failed verification is redirected;
auth-tls-pass-certificate-to-upstream (header ssl-client-cert); auth-tls-match-cn, "CN=<regex>" that the
certificate's subject must match, else 403.
"""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, ClientAuthSpec, IngressAnnotations, InvalidValue, Risk
from .validators import HOSTNAME, PORT, boolean, integer, is_true, one_of, pcre_regex

DEFAULT_DEPTH = 1
MAX_DEPTH = 100
_SECRET_REF = re.compile(r"(?=.{1,317}$)([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)/([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)")
# ingress-nginx's pattern for auth-tls-error-page: a URL or an absolute path of plain characters.
_ERROR_PAGE = re.compile(rf"(?:https?://{HOSTNAME}(?::{PORT})?)?(?:/[A-Za-z0-9._-]+)*/?")
_PRINTABLE = re.compile(r"[\x20-\x7e]{1,512}")


def _secret_ref(value: str) -> str:
    if not _SECRET_REF.fullmatch(value):
        raise InvalidValue("must be namespace/name of a Secret holding ca.crt, such as default/client-ca")
    return value


def _error_page(value: str) -> str:
    if not value or len(value) > 2048 or not _ERROR_PAGE.fullmatch(value):
        raise InvalidValue("must be a URL such as https://login.example.com/denied or a path such as /denied")
    return value


def _match_cn(value: str) -> str:
    if not value.startswith("CN=") or not _PRINTABLE.fullmatch(value):
        raise InvalidValue('must be "CN=" followed by a name or regular expression, such as CN=(client-a|client-b)')
    pcre_regex(value)
    return value


ANNOTATIONS = (
    Annotation("auth-tls-secret", reloads=False, validate=_secret_ref, risk=Risk.MEDIUM,
               doc="namespace/name of a Secret (the Ingress's namespace) with ca.crt, optionally ca.crl.",
               differs="Checked per request on this Ingress's paths only (ingress-nginx checks the whole host); the "
                       "Secret must be in the Ingress's namespace (ingress-nginx takes any), and a missing or "
                       "unusable one refuses the Ingress."),
    Annotation("auth-tls-verify-client", reloads=False, validate=one_of("on", "off", "optional", "optional_no_ca"),
               risk=Risk.MEDIUM, default="on", doc="on (default), off, optional or optional_no_ca.",
               differs="Plain HTTP carries no certificate: with on, a request over HTTP answers 400."),
    Annotation("auth-tls-verify-depth", reloads=False, validate=integer(0, MAX_DEPTH), risk=Risk.LOW, default="1",
               doc=f"Longest chain from the client certificate to the CA (default {DEFAULT_DEPTH})."),
    Annotation("auth-tls-error-page", reloads=False, validate=_error_page, risk=Risk.HIGH,
               doc="Where a request whose certificate failed is redirected (default: 400).",
               differs="A URL or a path, not an @location."),
    Annotation("auth-tls-pass-certificate-to-upstream", reloads=False, validate=boolean, risk=Risk.LOW,
               doc="Send the client certificate (URL-encoded PEM) in the ssl-client-cert header."),
    Annotation("auth-tls-match-cn", reloads=False, validate=_match_cn, risk=Risk.HIGH,
               doc='"CN=<regex>" the certificate subject must match, else 403.',
               differs="A regular expression PCRE refuses makes the paths answer 503 with PCRE's message "
                       "(ingress-nginx wrote it into nginx.conf, where nginx -t failed for every Ingress)."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "auth-tls-secret" not in values:
        for annotation in ANNOTATIONS[1:]:
            if annotation.name in values:
                parsed.warn(annotation.name, "has no effect without auth-tls-secret; ignored")
        return
    namespace, name = values["auth-tls-secret"].split("/")
    parsed.client_auth = ClientAuthSpec(
        secret_namespace=namespace, secret_name=name, verify=values.get("auth-tls-verify-client", "on"),
        depth=int(values.get("auth-tls-verify-depth", DEFAULT_DEPTH)), error_page=values.get("auth-tls-error-page"),
        pass_certificate=is_true(values.get("auth-tls-pass-certificate-to-upstream", "false")),
        match_cn=values.get("auth-tls-match-cn"))
