"""backend-protocol: how nginx talks to the backend: HTTP, HTTPS, gRPC over HTTP/2 (GRPC cleartext, GRPCS with
TLS), FastCGI (FCGI, with fastcgi.py's fastcgi-index and fastcgi-params-configmap), or AUTO_HTTP: the client's
own scheme, HTTP for a request that came over HTTP, HTTPS for one over HTTPS (ingress-nginx's
`proxy_pass $scheme://`). AJP is refused: nginx has no AJP module."""
from __future__ import annotations

from typing import Mapping

from services.nginxconf.config import BackendScheme

from .base import Annotation, IngressAnnotations, InvalidValue, Risk, Unsupported

_SCHEMES: dict[str, BackendScheme] = {"HTTP": "http", "HTTPS": "https", "GRPC": "grpc", "GRPCS": "grpcs",
                                      "FCGI": "fcgi", "AUTO_HTTP": "auto"}


def _protocol(value: str) -> str:
    upper = value.upper()
    if upper in _SCHEMES:
        return upper
    if upper == "AJP":
        raise Unsupported("AJP backends are not supported by pyngress (nginx has no AJP module); use HTTP, HTTPS, "
                          "GRPC, GRPCS, FCGI or AUTO_HTTP")
    raise InvalidValue("must be HTTP, HTTPS, GRPC, GRPCS, FCGI or AUTO_HTTP")


ANNOTATIONS = (
    Annotation("backend-protocol", validate=_protocol, risk=Risk.LOW, default="HTTP",
               doc="HTTP (default), HTTPS, GRPC, GRPCS, FCGI (FastCGI) or AUTO_HTTP (the client's scheme) to the "
                   "backend.",
               differs="AJP refuses the Ingress: nginx here has no AJP module."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # HTTP is the default and emits nothing, so such Ingresses share the default profile.
    if "backend-protocol" in values:
        parsed.backend_scheme = _SCHEMES[values["backend-protocol"]]
