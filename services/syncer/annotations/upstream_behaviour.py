"""How nginx talks to the backend beyond timeouts: retries on the next endpoint, rewriting the backend's
Location, Refresh and Set-Cookie headers, and the Connection header. Each one a plain nginx
directive in the profile, with ingress-nginx's meaning; values are allow-listed word by word."""
from __future__ import annotations

import re
from typing import Callable, Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk
from .validators import duration, integer, matching

# The conditions ingress-nginx allows for proxy_next_upstream (nginx's list less what makes no sense here).
_NEXT_UPSTREAM_CONDITIONS = ("error", "timeout", "invalid_header", "http_500", "http_502", "http_503", "http_504",
                             "http_403", "http_404", "http_429", "non_idempotent", "off")
# A URL or path as proxy_redirect, proxy_cookie_path and proxy_cookie_domain take it: no spaces, quotes, '$'
# (nginx variables) or other characters a header value would not hold.
_URL_WORD = re.compile(r"[A-Za-z0-9\-._~:/?#@!&*+,=%\[\]]{1,2048}")
_DOMAIN_WORD = re.compile(r"[A-Za-z0-9\-._~/:]{1,253}")


def next_upstream_conditions(value: str) -> str:
    words = value.split()
    unknown = [w for w in words if w not in _NEXT_UPSTREAM_CONDITIONS]
    if not words or unknown:
        raise InvalidValue(f"must be conditions separated by spaces, from {' '.join(_NEXT_UPSTREAM_CONDITIONS)}"
                           + (f"; not {' '.join(unknown)}" if unknown else ""))
    if "off" in words and len(words) > 1:
        raise InvalidValue("'off' cannot be combined with other conditions")
    return " ".join(dict.fromkeys(words))


def _replacement_pair(word: re.Pattern[str], what: str) -> Callable[[str], str]:
    """"off", or "FROM TO": two words of `word`'s characters."""
    def validate(value: str) -> str:
        words = value.split()
        if words == ["off"] or (len(words) == 2 and all(word.fullmatch(w) for w in words)):
            return " ".join(words)
        raise InvalidValue(f"must be off, or the {what} to change and its replacement separated by a space, "
                           f"each without spaces, quotes or '$'")
    return validate


redirect_word = matching(_URL_WORD.pattern,
                         says="must be a URL or path without spaces, quotes or '$', such as http://backend/ or /")
connection_header = matching(r"[A-Za-z0-9-]{1,64}", says="must be a header token such as keep-alive, close or upgrade")


ANNOTATIONS = (
    Annotation("proxy-next-upstream", validate=next_upstream_conditions, risk=Risk.MEDIUM, default="error timeout",
               doc="When a request goes on to the next endpoint (nginx's proxy_next_upstream conditions).",
               directive="proxy_next_upstream"),
    Annotation("proxy-next-upstream-timeout", validate=duration, risk=Risk.LOW, default="0s",
               doc="How long a request may keep trying further endpoints; 0 means no limit.",
               directive="proxy_next_upstream_timeout"),
    Annotation("proxy-next-upstream-tries", validate=integer(0, 100), risk=Risk.LOW, default="3",
               doc="How many endpoints a request may try; 0 means no limit.", directive="proxy_next_upstream_tries"),
    Annotation("proxy-redirect-from", validate=redirect_word, risk=Risk.MEDIUM,
               doc="Text of the backend's Location and Refresh headers to replace with proxy-redirect-to; off or "
                   "default as nginx's proxy_redirect."),
    Annotation("proxy-redirect-to", validate=redirect_word, risk=Risk.MEDIUM,
               doc="The replacement for proxy-redirect-from."),
    Annotation("proxy-cookie-path", validate=_replacement_pair(_URL_WORD, "path"), risk=Risk.MEDIUM, default="off",
               doc="A path attribute of the backend's Set-Cookie headers and its replacement (\"/ /app\"), or off.",
               directive="proxy_cookie_path"),
    Annotation("proxy-cookie-domain", validate=_replacement_pair(_DOMAIN_WORD, "domain"), risk=Risk.MEDIUM, default="off",
               doc="A domain attribute of the backend's Set-Cookie headers and its replacement, or off.",
               directive="proxy_cookie_domain"),
    Annotation("connection-proxy-header", validate=connection_header, risk=Risk.LOW,
               doc="The Connection header sent to the backend (keep-alive, close ...)."),
)

def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "proxy-redirect-from" in values:
        source = values["proxy-redirect-from"]
        if source in ("off", "default"):
            # nginx's "default" replaces the proxy_pass URL, here the internal http://upstream_balancer that no
            # backend ever names: it changes nothing, as off (and nginx would want it after proxy_pass).
            parsed.add("proxy_redirect", value="off", source="proxy-redirect-from")
        elif "proxy-redirect-to" in values:
            parsed.add("proxy_redirect", value=f"{source} {values['proxy-redirect-to']}", source="proxy-redirect-from")
        else:
            parsed.warnings.append("annotation proxy-redirect-from needs proxy-redirect-to beside it (or off or "
                                   "default); ignored")
    if "connection-proxy-header" in values:
        parsed.add("proxy_set_header", value=f"Connection {values['connection-proxy-header']}",
                   source="connection-proxy-header")
