"""mirror-target, mirror-host, mirror-request-body: every request of the Ingress is also sent to a mirror
(nginx's mirror module), whose answer is ignored, as in ingress-nginx.

The target is an http(s) URL that may hold the request's own variables ($request_uri, $uri, $args, $is_args,
$host, $scheme); its host is resolved per request with the node's DNS servers, so a name that does not
resolve loses the mirrored copies only. mirror-host sets the mirrored request's Host (default: the target's
host); mirror-request-body off sends it without the body.
"""
from __future__ import annotations

import re
from typing import Mapping

from services.nginxconf.config import Mirror
from services.nginxconf.render import REQUEST_VARIABLES

from .base import Annotation, IngressAnnotations, InvalidValue, Risk, Scope
from .validators import HOSTNAME, PORT, host_and_port, one_of

_VARIABLE = re.compile(r"\$(?:" + "|".join(REQUEST_VARIABLES) + r")(?![A-Za-z0-9_])")
_TARGET = re.compile(rf"https?://(?:{HOSTNAME})(?::{PORT})?(?:/[A-Za-z0-9\-._~%!&()*+,=:@/?]*)?")


def _target(value: str) -> str:
    # Each allowed variable stands for text a URL path may hold; any other `$` is refused.
    if len(value) > 2048 or not _TARGET.fullmatch(_VARIABLE.sub("v", value)) or "$" in _VARIABLE.sub("", value):
        raise InvalidValue("must be an http:// or https:// URL such as https://mirror.example.com$request_uri "
                           "(at most 2048 characters); the nginx variables it may hold are $" +
                           ", $".join(REQUEST_VARIABLES))
    return value


ANNOTATIONS = (
    Annotation("mirror-target", validate=_target, risk=Risk.HIGH, scope=Scope.INGRESS,
               doc="Also send every request to this URL (the answer is ignored).",
               differs="It may hold only the variables $request_uri, $uri, $args, $is_args, $host and $scheme; its "
                       "host is resolved per request with the node's DNS servers, so a name that does not resolve "
                       "loses the mirrored copies only."),
    Annotation("mirror-host", validate=host_and_port, risk=Risk.HIGH, scope=Scope.INGRESS,
               doc="Host header of the mirrored requests (default: the target's host)."),
    Annotation("mirror-request-body", validate=one_of("on", "off"), risk=Risk.LOW, scope=Scope.INGRESS,
               doc="off: mirror requests without their body (default on)."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "mirror-target" not in values:
        for name in ("mirror-host", "mirror-request-body"):
            if name in values:
                parsed.warn(name, "has no effect without mirror-target; ignored")
        return
    target = values["mirror-target"]
    host = values.get("mirror-host") or target.split("/")[2]
    parsed.mirror = Mirror(target=target, host=host, request_body=values.get("mirror-request-body", "on") == "on")
