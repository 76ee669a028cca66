"""permanent-redirect, permanent-redirect-code, temporal-redirect: answer every request with a redirect."""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk, when_true
from services.nginxconf.render import REQUEST_VARIABLES

from .validators import HOSTNAME, PORT, boolean, integer, is_true

_URL = re.compile(rf"(?:https?://{HOSTNAME}(?::{PORT})?)?(?:[/?#][A-Za-z0-9\-._~%!&()*+,=:@/?#]*)?")
# nginx expands a `$` as a variable even inside quotes: only the request's own variables are taken (the users of
# ingress-nginx write https://new.example.com$request_uri), each standing for text a URL may hold there.
_VARIABLE = re.compile(r"\$(?:" + "|".join(REQUEST_VARIABLES) + r")(?![A-Za-z0-9_])")


def _url(value: str) -> str:
    plain = _VARIABLE.sub("v", value)
    if len(value) > 2048 or not value.startswith(("http://", "https://", "/")) or not _URL.fullmatch(plain) \
            or "$" in plain:
        raise InvalidValue("must be an http:// or https:// URL, or a path starting with / (port 1-65535, at most "
                           "2048 characters) without quotes, spaces, ';', '{', '}' or '\\'; the nginx variables it "
                           "may hold are $" + ", $".join(REQUEST_VARIABLES))
    return value


ANNOTATIONS = (
    Annotation("permanent-redirect", validate=_url, risk=Risk.MEDIUM,
               doc="Redirect every request to this URL (301 by default).",
               differs="The URL may hold only the variables $request_uri, $uri, $args, $is_args, $host and $scheme."),
    Annotation("permanent-redirect-code", validate=integer(300, 308), risk=Risk.LOW, default="301",
               doc="Status code for permanent-redirect."),
    Annotation("temporal-redirect", validate=_url, risk=Risk.MEDIUM,
               doc="Redirect every request to this URL (302 by default).",
               differs="The URL may hold only the variables $request_uri, $uri, $args, $is_args, $host and $scheme."),
    Annotation("temporal-redirect-code", validate=integer(300, 308), risk=Risk.LOW, default="302",
               doc="Status code for temporal-redirect."),
    Annotation("relative-redirects", validate=boolean, risk=Risk.LOW, default="false",
               doc="Redirects nginx makes from a path (a redirect target starting with /) stay relative "
                   "(absolute_redirect off).", directive="absolute_redirect", argument=when_true("off")),
    Annotation("use-port-in-redirects", validate=boolean, risk=Risk.LOW, default="false",
               doc="Redirects to HTTPS name the port, also 443 (and nginx's own redirects keep the port).",
               # ingress-nginx writes port_in_redirect off unless asked (render.HTTP_DEFAULTS).
               directive="port_in_redirect", argument=when_true("on")),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # The router's redirect to HTTPS names the port too.
    parsed.port_in_redirects = is_true(values.get("use-port-in-redirects", "false"))
    # As in ingress-nginx, a temporal redirect wins over a permanent one.
    if "temporal-redirect" in values:
        source, code = "temporal-redirect", values.get("temporal-redirect-code", "302")
        if "permanent-redirect" in values:
            parsed.warn("permanent-redirect", "is overridden by temporal-redirect")
    elif "permanent-redirect" in values:
        source, code = "permanent-redirect", values.get("permanent-redirect-code", "301")
    else:
        for name in ("permanent-redirect-code", "temporal-redirect-code"):
            if name in values:
                parsed.warn(name, f"has no effect without {name.removesuffix('-code')}; ignored")
        return
    parsed.add("return", value=f"{code} {values[source]}", source=source)

