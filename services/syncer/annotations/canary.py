"""Canary releases (canary: "true" on a second Ingress for the same host and path), with ingress-nginx's
meaning: the canary's backend takes a request when its header says so (canary-by-header: "always", or
canary-by-header-value, or a match of canary-by-header-pattern; "never" keeps it off the canary), else when
its cookie (canary-by-cookie) is "always" ("never" keeps it off), else by weight (canary-weight out of
canary-weight-total, 100 by default). The decision is made per request in Lua (canary.lua) from the pushed
routes table, so changing any of these reloads nothing. A canary Ingress's other annotations do not apply:
the main Ingress's location settings serve both backends."""
from __future__ import annotations

from typing import Mapping

from .base import DEFAULT_WEIGHT_TOTAL, Annotation, CanaryPolicy, IngressAnnotations, Risk, Scope
from .validators import COOKIE_NAME, HEADER_NAME, boolean, integer, is_true, matching, pcre_regex

header_name = matching(HEADER_NAME, says="must be a header name such as X-Canary")
cookie_name = matching(COOKIE_NAME, says="must be a cookie name of letters, digits, '_' and '-', such as canary")
header_value = matching(r"[\x20-\x7e]{1,1024}", says="must be printable ASCII text of at most 1024 characters")


def header_pattern(value: str) -> str:
    header_value(value)
    pcre_regex(value)
    return value


ANNOTATIONS = (
    Annotation("canary", validate=boolean, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="This Ingress is the canary of the main Ingress with the same host and path.",
               differs="A canary attaches only to a main Ingress of its own namespace."),
    Annotation("canary-by-header", validate=header_name, risk=Risk.MEDIUM, scope=Scope.INGRESS, reloads=False,
               doc="Header that sends a request to the canary (\"always\") or keeps it off (\"never\")."),
    Annotation("canary-by-header-value", validate=header_value, risk=Risk.MEDIUM, scope=Scope.INGRESS, reloads=False,
               doc="The canary-by-header value that sends a request to the canary."),
    Annotation("canary-by-header-pattern", validate=header_pattern, risk=Risk.MEDIUM,
               scope=Scope.INGRESS, reloads=False,
               doc="A regular expression on the canary-by-header value that sends a request to the canary."),
    Annotation("canary-by-cookie", validate=cookie_name, risk=Risk.MEDIUM, scope=Scope.INGRESS, reloads=False,
               doc="Cookie that sends a request to the canary (\"always\") or keeps it off (\"never\")."),
    Annotation("canary-weight", validate=integer(0, 1_000_000), risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="Requests sent to the canary, out of canary-weight-total."),
    Annotation("canary-weight-total", validate=integer(1, 1_000_000), risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="The total canary-weight is out of (default 100)."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if not is_true(values.get("canary", "false")):
        ignored = sorted(name for name in values if name.startswith("canary-"))
        if ignored:
            parsed.warnings.append(f"annotations {', '.join(ignored)} apply only with canary: \"true\"; ignored")
        return
    total = int(values.get("canary-weight-total", DEFAULT_WEIGHT_TOTAL))
    weight = min(int(values.get("canary-weight", 0)), total)  # above the total: every request, as ingress-nginx
    parsed.canary = CanaryPolicy(header=values.get("canary-by-header"),
                                 header_value=values.get("canary-by-header-value"),
                                 header_pattern=values.get("canary-by-header-pattern"),
                                 cookie=values.get("canary-by-cookie"), weight=weight, weight_total=total)
