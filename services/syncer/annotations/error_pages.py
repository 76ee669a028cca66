"""default-backend, custom-http-errors and disable-proxy-intercept-errors: an Ingress's own error handling, as
in ingress-nginx.

default-backend names a Service of the Ingress's namespace (its first port): it answers when a route's own
Service has no endpoints, and it makes the error pages of custom-http-errors. custom-http-errors lists the
statuses (400-599) a backend's answer is replaced for, in this Ingress's locations only (the ConfigMap's list
applies to the others); the error backend is told the status in X-Code and its family of headers, and the
client keeps the status. disable-proxy-intercept-errors: "true" lets the backends' own error answers through
(the list then applies to nginx's own errors only).
"""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk
from .validators import boolean, is_true

_SERVICE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_CODE = re.compile(r"[45][0-9]{2}")


def _service(value: str) -> str:
    if not _SERVICE.fullmatch(value):
        raise InvalidValue("must name a Service of the Ingress's namespace, such as custom-errors")
    return value


def _codes(value: str) -> str:
    codes = [code.strip() for code in value.split(",") if code.strip()]
    if not codes or not all(_CODE.fullmatch(code) for code in codes):
        raise InvalidValue("must be error statuses from 400 to 599 separated by commas, such as 404,503")
    return ",".join(sorted(set(codes), key=int))


ANNOTATIONS = (
    Annotation("default-backend", validate=_service, risk=Risk.LOW, reloads=False,
               doc="A Service of the namespace answering when a route's Service has no endpoints, and the error "
                   "pages of custom-http-errors."),
    Annotation("custom-http-errors", validate=_codes, risk=Risk.LOW,
               doc="Statuses (comma-separated) whose backend answers are replaced by the error backend's."),
    Annotation("disable-proxy-intercept-errors", validate=boolean, risk=Risk.LOW,
               doc="true: backends' error answers pass; custom-http-errors applies to nginx's own errors only."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    parsed.default_backend_service = values.get("default-backend")
    if "custom-http-errors" in values:
        parsed.custom_http_errors = tuple(int(code) for code in values["custom-http-errors"].split(","))
        parsed.pass_backend_errors = is_true(values.get("disable-proxy-intercept-errors", "false"))
    elif "disable-proxy-intercept-errors" in values:
        parsed.warn("disable-proxy-intercept-errors", "has no effect without custom-http-errors; ignored")
