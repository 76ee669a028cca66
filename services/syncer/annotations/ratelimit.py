"""limit-rps, limit-rpm, limit-connections, limit-burst-multiplier, limit-allowlist (old name
limit-whitelist), limit-rate, limit-rate-after: ingress-nginx's rate limiting, per client address.

The request limits are nginx's limit_req/limit_conn zones, shared memory that every worker counts in. As in
ingress-nginx, the zones belong to one Ingress (named after its namespace, name and uid): the parsed
annotations hold only the numbers, and `rate_limit_for` names the zones once the Ingress is known.
limit-rate and limit-rate-after are kilobytes (per second) per request, as ingress-nginx writes them.
"""
from __future__ import annotations

import re
from typing import Mapping

from services.nginxconf.config import RateLimit

from .base import Annotation, IngressAnnotations, Risk, Unsupported
from .ipallowlist import cidr_list
from .validators import integer

DEFAULT_BURST_MULTIPLIER = 5
# nginx refuses a limit_conn of 65536 or more; limit_req keeps rate and burst in thousandths in 64 bits.
MAX_CONNECTIONS = 65535
MAX_REQUESTS = 10**6
MAX_BURST_MULTIPLIER = 1000
MAX_KILOBYTES = 10**9

_LIMITS = ("limit-rps", "limit-rpm", "limit-connections")


def _no_hourly_limit(value: str) -> str:
    raise Unsupported("ingress-nginx has no limit-rph, and nginx counts requests per second or per minute only; "
                       "use limit-rpm (a limit-rph of 600 is a limit-rpm of 10)")


ANNOTATIONS = (
    Annotation("limit-rps", validate=integer(0, MAX_REQUESTS), risk=Risk.LOW,
               doc="Requests per second from one client address; past it and its burst, limit-req-status-code."),
    Annotation("limit-rpm", validate=integer(0, MAX_REQUESTS), risk=Risk.LOW,
               doc="Requests per minute from one client address."),
    Annotation("limit-connections", validate=integer(0, MAX_CONNECTIONS), risk=Risk.LOW,
               doc="Requests in progress at once from one client address; past it, limit-conn-status-code."),
    Annotation("limit-burst-multiplier", validate=integer(0, MAX_BURST_MULTIPLIER), risk=Risk.LOW,
               doc=f"Burst of limit-rps/limit-rpm, as a multiple of the limit (default {DEFAULT_BURST_MULTIPLIER}).",
               differs="0 means no burst (ingress-nginx writes burst=0, which nginx refuses)."),
    Annotation("limit-allowlist", validate=cidr_list, risk=Risk.LOW,
               doc="Client networks that are never rate limited."),
    Annotation("limit-whitelist", validate=cidr_list, risk=Risk.LOW, doc="Old name of limit-allowlist."),
    Annotation("limit-rate", validate=integer(0, MAX_KILOBYTES), risk=Risk.LOW,
               doc="Kilobytes per second sent to the client per request; 0: no limit."),
    Annotation("limit-rate-after", validate=integer(0, MAX_KILOBYTES), risk=Risk.LOW,
               doc="Kilobytes of a response sent before limit-rate applies."),
    Annotation("limit-rph", validate=_no_hourly_limit, risk=Risk.LOW,
               doc="Refused: nginx limits per second or per minute; use limit-rpm."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    for name, directive in (("limit-rate", "limit_rate"), ("limit-rate-after", "limit_rate_after")):
        if int(values.get(name, "0")):
            parsed.add(directive, value=f"{values[name]}k", source=name)
    limits = {name: int(values.get(name, "0")) for name in _LIMITS}
    allowlist_source = "limit-allowlist" if "limit-allowlist" in values else "limit-whitelist"
    if not any(limits.values()):
        for name in ("limit-burst-multiplier", allowlist_source):
            if name in values:
                parsed.warn(name, "has no effect without limit-rps, limit-rpm or limit-connections; ignored")
        return
    if allowlist_source == "limit-allowlist" and "limit-whitelist" in values:
        parsed.warn("limit-whitelist", "is overridden by limit-allowlist")
    allowlist = values.get(allowlist_source, "")
    parsed.rate_limit = RateLimit(
        zone="", rps=limits["limit-rps"], rpm=limits["limit-rpm"], connections=limits["limit-connections"],
        burst_multiplier=int(values.get("limit-burst-multiplier", DEFAULT_BURST_MULTIPLIER)),
        allowlist=tuple(allowlist.split(" ")) if allowlist else ())


_UID = re.compile(r"[A-Za-z0-9-]{1,64}")


def zone_name(*, namespace: str, name: str, uid: object) -> str:
    """ingress-nginx's zone name for an Ingress: "namespace_name_uid" (the uid only when it is a plain one), so
    that a deleted and re-created Ingress starts counting afresh."""
    own = f"{namespace}_{name}"
    return f"{own}_{uid}" if isinstance(uid, str) and _UID.fullmatch(uid) else own
