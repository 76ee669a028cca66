"""Session affinity by cookie (affinity: cookie), with ingress-nginx's annotation names and cookie attributes.
The cookie names the endpoint (a hash of its address and port), so a session keeps its endpoint across nginx
reloads, syncer restarts and endpoints added beside it; the pick and the cookie happen in Lua (affinity.lua)
from the pushed routes table, so changing these reloads nothing."""
from __future__ import annotations

import re
from typing import Mapping

from .base import AffinityPolicy, Annotation, IngressAnnotations, InvalidValue, Risk, Scope
from .validators import COOKIE_NAME, HOSTNAME, boolean, integer, is_true, matching, one_of

DEFAULT_COOKIE = "INGRESSCOOKIE"
cookie_name = matching(COOKIE_NAME, says="must be a cookie name of letters, digits, '_' and '-', such as INGRESSCOOKIE")
_COOKIE_PATH = r"/[A-Za-z0-9\-._~!&'()*+,=:@/%]{0,1023}"
cookie_path = matching(_COOKIE_PATH, says="must be a path such as /app (no spaces, ';' or regular expressions)")
_PLAIN_COOKIE_PATH = re.compile(_COOKIE_PATH)


_SECONDS = integer(0, 10**9)
_DOMAIN = re.compile(rf"\.?{HOSTNAME}")


def _domain(value: str) -> str:
    if len(value) > 253 or not _DOMAIN.fullmatch(value):
        raise InvalidValue("must be a domain such as example.com or .example.com")
    return value


ANNOTATIONS = (
    Annotation("affinity", validate=one_of("cookie"), risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="Session affinity: only \"cookie\".",
               differs="Without session-cookie-path, the cookie of a regular-expression path has Path=/ "
                       "(ingress-nginx sends the expression as the path, where sessions never stick)."),
    Annotation("affinity-mode", validate=one_of("balanced", "persistent"), risk=Risk.LOW,
               scope=Scope.INGRESS, reloads=False,
               doc="balanced (default): the cookie holds a key that picks the endpoint by consistent hashing, so "
                   "endpoints added take a share of the sessions; persistent: the cookie names the endpoint, and a "
                   "session keeps it while it exists."),
    Annotation("affinity-canary-behavior", validate=one_of("sticky", "legacy"), risk=Risk.LOW,
               scope=Scope.INGRESS, reloads=False,
               doc="On a canary Ingress (with or without affinity of its own): sticky (default) keeps a session the "
                   "canary served on it when the main Ingress has affinity: cookie, with the main Ingress's cookie; "
                   "legacy balances the canary without the cookie."),
    Annotation("session-cookie-name", validate=cookie_name, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="The affinity cookie's name (default INGRESSCOOKIE)."),
    Annotation("session-cookie-path", validate=cookie_path, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="The cookie's Path (default: the Ingress path of the rule that served the request; / for "
                   "a regular expression path that is no cookie path)."),
    Annotation("session-cookie-max-age", validate=_SECONDS, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="The cookie's Max-Age in seconds (unset: a session cookie)."),
    Annotation("session-cookie-expires", validate=_SECONDS, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="Seconds from now to the cookie's Expires."),
    Annotation("session-cookie-secure", validate=boolean, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="Mark the cookie Secure over HTTP too (over HTTPS it always is)."),
    Annotation("session-cookie-samesite", validate=one_of("None", "Lax", "Strict"), risk=Risk.LOW,
               scope=Scope.INGRESS, reloads=False, doc="The cookie's SameSite attribute."),
    Annotation("session-cookie-conditional-samesite-none", validate=boolean, risk=Risk.LOW, scope=Scope.INGRESS,
               reloads=False, doc="With SameSite None: leave the attribute out for the clients known to "
               "mishandle it (iOS 12, macOS 10.14 Safari, Chrome 51-66, old UC Browser)."),
    Annotation("session-cookie-domain", validate=_domain, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="The cookie's Domain attribute."),
    Annotation("session-cookie-change-on-failure", validate=boolean, risk=Risk.LOW, scope=Scope.INGRESS,
               reloads=False, doc="When the session's endpoint fails: false (default) retries that endpoint; "
               "true retries the next one and re-issues the cookie for it."),
)


def route_cookie_path(ingress_path: str | None) -> str:
    """The cookie's Path without session-cookie-path: the Ingress path of the route, as ingress-nginx sets it
    (each rule its own), or / for a default backend and for a regular expression path that would not be a
    cookie path (ingress-nginx sends such a path as it is written, and its sessions never stick there)."""
    if ingress_path is None or not _PLAIN_COOKIE_PATH.fullmatch(ingress_path):
        return "/"
    return ingress_path


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # A canary Ingress's behaviour needs no affinity of its own: it follows the main Ingress's (ingress-nginx).
    parsed.affinity_canary_legacy = values.get("affinity-canary-behavior") == "legacy"
    if values.get("affinity") != "cookie":
        ignored = sorted(n for n in values if n.startswith(("session-cookie-", "affinity-"))
                         and n != "affinity-canary-behavior")
        if ignored:
            parsed.warnings.append(f"annotations {', '.join(ignored)} apply only with affinity: cookie; ignored")
        return
    parsed.affinity = AffinityPolicy(
        cookie=values.get("session-cookie-name", DEFAULT_COOKIE), path=values.get("session-cookie-path"),
        max_age=int(values["session-cookie-max-age"]) if "session-cookie-max-age" in values else None,
        expires=int(values["session-cookie-expires"]) if "session-cookie-expires" in values else None,
        secure=is_true(values.get("session-cookie-secure", "false")),
        samesite=values.get("session-cookie-samesite"),
        conditional_samesite_none=is_true(values.get("session-cookie-conditional-samesite-none", "false")),
        domain=values.get("session-cookie-domain"),
        mode=values.get("affinity-mode", "balanced"),
        change_on_failure=is_true(values.get("session-cookie-change-on-failure", "false")))
