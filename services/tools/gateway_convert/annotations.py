"""An Ingress's annotations → what its HTTPRoute rules take from them, and why each other one is left behind.

Values are read with the registry's own validators (services/syncer/annotations): an invalid value is left out,
as ingress-nginx and pyngress set it aside. Every annotation under the prefix is either taken here (`TAKEN`) or
named in the report with the reason the Gateway API cannot say it (`reason_not_converted`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import urlsplit

from services.syncer.annotations import ANNOTATIONS
from services.syncer.annotations.access_control import is_access_control
from services.syncer.annotations.base import InvalidValue

# The annotations whose meaning an HTTPRoute can carry (a match, a filter, a weight or a timeout).
TAKEN = frozenset({
    "use-regex", "rewrite-target", "app-root", "x-forwarded-prefix", "upstream-vhost",
    "permanent-redirect", "permanent-redirect-code", "temporal-redirect", "temporal-redirect-code",
    "ssl-redirect", "force-ssl-redirect", "proxy-read-timeout", "proxy-send-timeout", "custom-headers",
    "canary", "canary-weight", "canary-weight-total", "canary-by-header", "canary-by-header-value",
    "canary-by-header-pattern",
})
# Redirect codes a RequestRedirect takes (ingress-nginx's *-redirect-code accepts 300-308).
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
# Gateway API durations: up to 5 digits per unit.
_UNITS_MS = (("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))

# Why an annotation is not converted, by name or by the prefix of its family; the first that fits is used.
_REASONS: tuple[tuple[str, str], ...] = (
    ("ssl-passthrough", "TLS passthrough is a TLSRoute on a Passthrough listener: write one by hand"),
    ("canary-by-cookie", "the Gateway API has no cookie match"),
    ("mirror-", "RequestMirror sends to a Service (backendRef), not to a URL; write the filter by hand"),
    ("backend-protocol", "the backend's protocol is a GRPCRoute or a BackendTLSPolicy in the Gateway API"),
    ("proxy-ssl-", "TLS to the backend is a BackendTLSPolicy in the Gateway API"),
    ("affinity", "session persistence is not in the Gateway API's standard channel"),
    ("session-cookie-", "session persistence is not in the Gateway API's standard channel"),
    ("enable-cors", "the Gateway API's CORS filter is not in its standard channel"),
    ("cors-", "the Gateway API's CORS filter is not in its standard channel"),
    ("-snippet", "raw nginx configuration has no Gateway API form"),
    ("from-to-www-redirect", "write a RequestRedirect route for the other host name by hand"),
    ("server-alias", "list the other host names in the HTTPRoute's hostnames"),
    ("proxy-connect-timeout", "the Gateway API has no connect timeout"),
)
_ACCESS_REASON = ("it controls access and the Gateway API has no filter for it: the Ingress is not converted, so "
                  "that it is never served open; keep it as an Ingress (pyngress serves both)")


def reason_not_converted(name: str) -> str:
    """Why the annotation `name` (without the prefix) has no HTTPRoute form."""
    if name not in ANNOTATIONS:
        return "not an annotation ingress-nginx or pyngress reads"
    if is_access_control(name):
        return _ACCESS_REASON
    for start, reason in _REASONS:
        if name == start or name.startswith(start) or (start.startswith("-") and name.endswith(start)):
            return reason
    return "an nginx setting with no Gateway API field; pyngress's default applies to the route"


@dataclass
class Redirect:
    url: str
    code: int


@dataclass
class CanarySettings:
    weight: int | None = None
    total: int = 100
    header: str | None = None
    header_value: str | None = None
    header_pattern: str | None = None


@dataclass
class RouteSettings:
    """What one Ingress's annotations mean for its routes; `problems` are the report's reasons, by annotation."""
    use_regex: bool = False
    rewrite_target: str | None = None
    app_root: str | None = None
    forwarded_prefix: str | None = None
    upstream_vhost: str | None = None
    redirect: Redirect | None = None
    ssl_redirect: bool = True
    force_ssl_redirect: bool = False
    backend_timeout: str | None = None
    custom_headers: str | None = None  # a ConfigMap: NAME or NAMESPACE/NAME
    canary: CanarySettings | None = None
    access_control: list[str] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)


def nginx_milliseconds(nginx_duration: str) -> int:
    """An nginx duration as the registry writes it ("60s", "2m", "500ms", "60") in milliseconds."""
    digits = nginx_duration.rstrip("hms")
    return int(digits) * dict(_UNITS_MS)[nginx_duration[len(digits):] or "s"]


def gateway_duration(milliseconds: int) -> str | None:
    """A Gateway API Duration ("1m30s"), or None for 0 (no timeout has no such form)."""
    parts = []
    for name, size in _UNITS_MS:
        if milliseconds >= size:
            parts.append(f"{milliseconds // size}{name}")
            milliseconds %= size
    return "".join(parts) or None


def read_settings(annotations: Mapping[str, Any], *, prefix: str) -> RouteSettings:
    """The settings of an Ingress with these metadata.annotations."""
    settings = RouteSettings()
    values: dict[str, str] = {}
    start = prefix + "/"
    for full_name, raw in sorted(annotations.items()):
        if not full_name.startswith(start):
            continue
        name = full_name[len(start):]
        if name not in TAKEN:
            if is_access_control(name):
                settings.access_control.append(name)
            settings.problems[name] = f"not converted: {reason_not_converted(name)}"
            continue
        try:
            values[name] = ANNOTATIONS[name].validate(raw) if isinstance(raw, str) else ""
        except InvalidValue as err:
            settings.problems[name] = f"invalid value {raw!r} ({err}), set aside as ingress-nginx does"
    _apply(values, settings)
    return settings


def _apply(values: dict[str, str], settings: RouteSettings) -> None:
    settings.use_regex = values.get("use-regex") == "true"
    settings.rewrite_target = values.get("rewrite-target")
    settings.app_root = values.get("app-root")
    settings.forwarded_prefix = values.get("x-forwarded-prefix") or None
    settings.ssl_redirect = values.get("ssl-redirect", "true") == "true"
    settings.force_ssl_redirect = values.get("force-ssl-redirect") == "true"
    settings.custom_headers = values.get("custom-headers")
    vhost = values.get("upstream-vhost")
    if vhost is not None and ":" in vhost:
        settings.problems["upstream-vhost"] = "a URLRewrite hostname has no port; the Host header keeps none"
        vhost = vhost.split(":", 1)[0]
    settings.upstream_vhost = vhost
    # permanent-redirect wins over temporal-redirect, as in ingress-nginx.
    for kind in ("permanent", "temporal"):
        url = values.get(f"{kind}-redirect")
        if url and settings.redirect is None:
            code = int(values.get(f"{kind}-redirect-code") or (301 if kind == "permanent" else 302))
            if code not in REDIRECT_CODES:
                default = 301 if kind == "permanent" else 302
                settings.problems[f"{kind}-redirect-code"] = (f"a RequestRedirect answers 301, 302, 303, 307 or "
                                                              f"308, not {code}; {default} is used")
                code = default
            settings.redirect = Redirect(url, code)
            parts = urlsplit(url)
            if parts.query or parts.fragment:
                settings.problems[f"{kind}-redirect"] = (f"the query string or fragment of {url} has no "
                                                         "RequestRedirect field; the redirect leaves it out")
    # nginx's timeouts run between two reads (two writes); backendRequest bounds the whole answer: the longer
    # of the two is the closest bound (docs/migrating.md says so).
    timeouts = [nginx_milliseconds(values[n]) for n in ("proxy-read-timeout", "proxy-send-timeout") if n in values]
    settings.backend_timeout = gateway_duration(max(timeouts)) if timeouts else None
    if values.get("canary") == "true":
        settings.canary = CanarySettings(
            weight=int(values["canary-weight"]) if "canary-weight" in values else None,
            total=int(values.get("canary-weight-total") or 100), header=values.get("canary-by-header"),
            header_value=values.get("canary-by-header-value"), header_pattern=values.get("canary-by-header-pattern"))
