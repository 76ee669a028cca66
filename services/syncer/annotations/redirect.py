"""permanent-redirect, permanent-redirect-code, temporal-redirect: answer every request with a redirect."""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk
from .validators import HOSTNAME, PORT, integer

# No '$': nginx would expand it as a variable even inside quotes, so nginx.conf rendering refuses it.
_URL = re.compile(rf"https?://{HOSTNAME}(?::{PORT})?(?:[/?#][A-Za-z0-9\-._~%!&()*+,=:@/?#]*)?")


def _url(value: str) -> str:
    if len(value) > 2048 or not _URL.fullmatch(value):
        raise InvalidValue("must be an absolute http:// or https:// URL (port 1-65535, at most 2048 characters) "
                           "without quotes, spaces, '$', ';', '{', '}' or '\\' (nginx variables such as "
                           "$request_uri are not supported)")
    return value


ANNOTATIONS = (
    Annotation("permanent-redirect", validate=_url, risk=Risk.MEDIUM,
               doc="Redirect every request to this URL (301 by default)."),
    Annotation("permanent-redirect-code", validate=integer(300, 308), risk=Risk.LOW,
               doc="Status code for permanent-redirect."),
    Annotation("temporal-redirect", validate=_url, risk=Risk.MEDIUM,
               doc="Redirect every request to this URL with 302."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # As in ingress-nginx, a temporal redirect wins over a permanent one.
    if "temporal-redirect" in values:
        source, code = "temporal-redirect", "302"
        if "permanent-redirect" in values:
            parsed.warn("permanent-redirect", "is overridden by temporal-redirect")
    elif "permanent-redirect" in values:
        source, code = "permanent-redirect", values.get("permanent-redirect-code", "301")
    else:
        if "permanent-redirect-code" in values:
            parsed.warn("permanent-redirect-code", "has no effect without permanent-redirect; ignored")
        return
    parsed.add("return", value=f"{code} {values[source]}", source=source)
