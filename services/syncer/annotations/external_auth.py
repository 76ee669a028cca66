"""auth-url and its options: each request is first asked of an external HTTP service (nginx's auth_request).

auth-url, auth-method, auth-signin (with the rd= parameter, renamed by auth-signin-redirect-param),
auth-response-headers, auth-request-redirect, auth-always-set-cookie, auth-cache-key with auth-cache-duration,
auth-proxy-set-headers (a ConfigMap of headers for the service, resolved in services/syncer/model/auth_secrets.py),
auth-snippet (under the snippet rule of snippets.py), and the auth-keepalive* family: with auth-keepalive > 0
connections to the service are kept open (ingress-nginx's conditions: auth-keepalive-requests and
auth-keepalive-timeout must be above zero, or keepalive is off with a warning).

auth-url may hold the variables of the request's host ($host, $http_host, $best_http_host: ingress-nginx's
oauth2-proxy example asks https://$host/oauth2/auth); its host is resolved per request with the system's DNS servers
(services/nginxconf/resolvers.py), so a Service DNS name works and follows the Service; with keepalive the
syncer resolves it at each push instead (the balancer takes addresses), so keepalive needs a URL without variables. auth-signin takes the variables that
the Lua which answers the redirect expands itself (external_auth.lua).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from services.nginxconf.config import AuthKeepalive, ExternalAuth
from services.nginxconf.render import AUTH_URL_VARIABLES, CACHE_KEY_VARIABLES, PROXY_HEADERS

from .base import Annotation, IngressAnnotations, InvalidValue, Risk
from .validators import HOSTNAME, PORT, boolean, configmap_name, integer, is_true, one_of

_PATH_CHARS = r"[A-Za-z0-9\-._~%!&()*+,=:@/]"
_AUTH_URL = re.compile(rf"https?://{HOSTNAME}(?::{PORT})?(?:/{_PATH_CHARS}*)?")
_AUTH_URL_VARIABLE = re.compile(r"\$(?:" + "|".join(AUTH_URL_VARIABLES) + r")(?![A-Za-z0-9_])")
# What external_auth.lua expands in auth-signin (ingress-nginx's users write these, e.g. for oauth2-proxy).
SIGNIN_VARIABLES = ("best_http_host", "escaped_request_uri", "http_host", "host", "pass_access_scheme",
                    "request_uri", "scheme")
_SIGNIN_VARIABLE = re.compile(r"\$(?:" + "|".join(SIGNIN_VARIABLES) + r")(?![A-Za-z0-9_])")
_SIGNIN = re.compile(r"https?://(?:[A-Za-z0-9.-]+|@)(?::(?:[0-9]{1,5}|@))?(?:[/?#][A-Za-z0-9\-._~%!&()*+,=:@/?#]*)?")
_REQUEST_REDIRECT = re.compile(r"[A-Za-z0-9\-._~%!&()*+,=:@/?#]{1,2048}")
_HEADER = re.compile(r"[A-Za-z0-9_-]{1,100}")
_RESERVED_HEADERS = frozenset(name.lower() for name, _ in PROXY_HEADERS)
_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "CONNECT", "OPTIONS", "TRACE")


def _auth_url(value: str) -> str:
    # Each allowed variable stands for a host name, which is also valid in a path.
    if len(value) > 2048 or not _AUTH_URL.fullmatch(_AUTH_URL_VARIABLE.sub("h", value)):
        raise InvalidValue("must be an http:// or https:// URL such as http://auth.auth-ns.svc.cluster.local:8080/check "
                           "(port 1-65535, at most 2048 characters), without query, quotes, spaces or ';'; the nginx "
                           "variables it may hold are $" + ", $".join(AUTH_URL_VARIABLES))
    return value if value.count("/") > 2 else value + "/"  # "http://host" means its "/"


def _signin(value: str) -> str:
    # Each allowed variable stands for something a URL may hold at its place; '@' is not otherwise valid there.
    if len(value) > 2048 or not _SIGNIN.fullmatch(_SIGNIN_VARIABLE.sub("@", value)):
        raise InvalidValue("must be an http:// or https:// URL (at most 2048 characters) without quotes, spaces "
                           "or ';'; the nginx variables it may hold are $" + ", $".join(SIGNIN_VARIABLES))
    return value


def _request_redirect(value: str) -> str:
    if not _REQUEST_REDIRECT.fullmatch(value):
        raise InvalidValue("must be a URL or path such as https://app.example.com/home, without quotes, spaces, "
                           "'$' or ';'")
    return value


def _comma_items(value: str, item: re.Pattern[str], refusal: str) -> list[str]:
    """The non-empty items of a comma-separated list, each matching `item`; else InvalidValue(refusal)."""
    items = [part.strip(" ") for part in value.split(",") if part.strip(" ")]
    if not items or not all(item.fullmatch(part) for part in items):
        raise InvalidValue(refusal)
    return items


def _response_headers(value: str) -> str:
    headers = _comma_items(value, _HEADER, "must be a comma-separated list of header names such as "
                                           "X-Auth-Request-User, X-Auth-Request-Email")
    reserved = [h for h in headers if h.lower() in _RESERVED_HEADERS]
    if reserved:
        raise InvalidValue(f"{', '.join(reserved)} is set by the controller for every request and cannot come "
                           "from the auth service; remove it from the list")
    return ",".join(dict.fromkeys(headers))


_PARAM = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CACHE_KEY = re.compile(rf"(?:\$(?:{CACHE_KEY_VARIABLES})(?![a-z0-9_])|[A-Za-z0-9_:-]){{1,300}}")
_CACHE_DURATION = re.compile(r"(?:(?:[1-5][0-9]{2}|any) ){0,10}[0-9]{1,6}[smhd]")
DEFAULT_CACHE_DURATION = "200 202 401 5m"


def _cache_key(value: str) -> str:
    if not _CACHE_KEY.fullmatch(value):
        raise InvalidValue("must be nginx variables and letters, digits, '_', ':' and '-', such as "
                           "$remote_user$http_authorization; the variables may be $http_<header>, $cookie_<name>, "
                           "$arg_<name>, $remote_user, $remote_addr, $host, $request_uri, $uri, $scheme, "
                           "$request_method")
    return value


def _cache_durations(value: str) -> str:
    return ",".join(_comma_items(value, _CACHE_DURATION, "must be comma-separated durations, each with the status "
                                 "codes it is for, such as \"200 202 401 5m\" or \"200 1m, 401 30s\" (units s, "
                                 "m, h, d)"))


def _redirect_param(value: str) -> str:
    if not _PARAM.fullmatch(value):
        raise InvalidValue("must be a query parameter name such as rd or redirect_uri")
    return value


ANNOTATIONS = (
    Annotation("auth-url", validate=_auth_url, risk=Risk.HIGH,
               doc="Ask this HTTP service about every request: 2xx lets it through, 401/403 answer the client.",
               differs="It may hold only the variables $host, $http_host and $best_http_host (ingress-nginx takes "
                       "any); its host is resolved per request with the node's DNS servers, and one that does not "
                       "resolve answers 500 for this Ingress only."),
    Annotation("auth-method", validate=one_of(*_METHODS), risk=Risk.LOW,
               doc="HTTP method of the request to auth-url (default GET)."),
    Annotation("auth-signin", validate=_signin, risk=Risk.HIGH,
               doc="Where a 401 from auth-url redirects, with rd= the original URL.",
               differs="It may hold only the variables $host, $http_host, $best_http_host, $scheme, "
                       "$pass_access_scheme, $request_uri and $escaped_request_uri (ingress-nginx takes any)."),
    Annotation("auth-signin-redirect-param", validate=_redirect_param, risk=Risk.MEDIUM,
               doc="Name of auth-signin's parameter carrying the original URL (default rd)."),
    Annotation("auth-response-headers", validate=_response_headers, risk=Risk.MEDIUM,
               doc="Headers copied from auth-url's answer to the request to the backend.",
               differs="It may not name a header the controller sets itself (Host, X-Forwarded-*, ...)."),
    Annotation("auth-request-redirect", validate=_request_redirect, risk=Risk.MEDIUM,
               doc="X-Auth-Request-Redirect sent to auth-url (default: the request's URI)."),
    Annotation("auth-always-set-cookie", validate=boolean, risk=Risk.LOW,
               doc="Pass auth-url's Set-Cookie to the client also on error answers."),
    Annotation("enable-global-auth", validate=boolean, risk=Risk.LOW,
               doc="false: the ConfigMap's global-auth-url does not apply to this Ingress (default true)."),
    Annotation("auth-cache-key", validate=_cache_key, risk=Risk.MEDIUM,
               doc="Cache auth-url's answers under this key (nginx variables such as $remote_user$http_authorization).",
               differs="It may hold only $http_*, $cookie_*, $arg_*, $remote_user, $remote_addr, $host, $uri, "
                       "$request_uri, $scheme and $request_method."),
    Annotation("auth-cache-duration", validate=_cache_durations, risk=Risk.MEDIUM,
               doc=f"How long each answer is cached, by status (default \"{DEFAULT_CACHE_DURATION}\")."),
    Annotation("auth-keepalive", validate=integer(0, 10**6), risk=Risk.LOW,
               doc="Idle connections to auth-url kept open per worker (default 0: none).",
               differs="Kept for HTTP/1.x clients while HTTP/2 is on (ingress-nginx turns it off whenever HTTP/2 is "
                       "on, its default); any 2xx lets the request through (ingress-nginx's keepalive path takes "
                       "only 200); ignored with a warning for an auth-url holding a variable."),
    Annotation("auth-keepalive-share-vars", validate=boolean, risk=Risk.LOW,
               doc="With auth-keepalive: the auth request shares the request's variables, so the same "
                   "X-Request-ID (default false)."),
    Annotation("auth-keepalive-requests", validate=integer(0, 10**9), risk=Risk.LOW,
               doc="With auth-keepalive: requests per kept connection (default 1000)."),
    Annotation("auth-keepalive-timeout", validate=integer(0, 10**6), risk=Risk.LOW,
               doc="With auth-keepalive: seconds an idle connection stays open (default 60)."),
    Annotation("auth-proxy-set-headers", validate=configmap_name, risk=Risk.MEDIUM,
               doc="A ConfigMap (NAME, or NAMESPACE/NAME) whose entries are headers sent to auth-url.",
               differs="The ConfigMap must be in the Ingress's namespace (another one needs "
                       "allow-cross-namespace-resources) and its values' nginx variables are checked; an entry "
                       "naming a header the auth request already carries, or a missing ConfigMap, makes the paths "
                       "answer 503."),
)

# The controller ConfigMap's global-auth-* keys → the annotation whose validator and meaning they share.
GLOBAL_AUTH_KEYS = {f"global-{name}": name for name in (
    "auth-url", "auth-method", "auth-signin", "auth-signin-redirect-param", "auth-response-headers",
    "auth-request-redirect", "auth-always-set-cookie", "auth-cache-key", "auth-cache-duration", "auth-snippet")}


@dataclass
class GlobalAuth:
    auth: ExternalAuth | None = None
    problem: str | None = None  # set: every Ingress it would apply to is denied (503), never served open
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def parse_global_auth(data: Mapping[str, Any]) -> GlobalAuth:
    """The ConfigMap's global-auth-* keys, validated as their annotations are."""
    found = GlobalAuth()
    values: dict[str, str] = {}
    for key, name in GLOBAL_AUTH_KEYS.items():
        if key not in data:
            continue
        raw = data[key]
        try:
            if name == "auth-snippet":
                raise InvalidValue("snippets are disabled in pyngress (they are raw nginx configuration); remove it")
            if not isinstance(raw, str):
                raise InvalidValue("ConfigMap values must be strings; quote it in the manifest")
            values[name] = _BY_NAME[name].validate(raw)
        except InvalidValue as err:
            found.errors.append(f"key {key} value {raw!r}: {err}; Ingresses under global authentication answer "
                                "503 until it is fixed")
            found.problem = f"the ConfigMap's {key} is invalid"
    if "auth-url" not in values:
        if found.problem is None and values:
            found.warnings += [f"key global-{name} has no effect without global-auth-url; ignored" for name in values]
        return found
    found.auth = _external_auth(values)
    return found


def _external_auth(values: Mapping[str, str]) -> ExternalAuth:
    headers = values.get("auth-response-headers")
    return ExternalAuth(
        url=values["auth-url"], method=values.get("auth-method"), signin=values.get("auth-signin"),
        signin_redirect_param=values.get("auth-signin-redirect-param", "rd"),
        response_headers=tuple(headers.split(",")) if headers else (),
        request_redirect=values.get("auth-request-redirect"),
        always_set_cookie=is_true(values.get("auth-always-set-cookie", "false")),
        cache_key=values.get("auth-cache-key"),
        cache_durations=(tuple(values.get("auth-cache-duration", DEFAULT_CACHE_DURATION).split(","))
                         if "auth-cache-key" in values else ()))


_BY_NAME = {a.name: a for a in ANNOTATIONS}
_OPTIONS = tuple(a.name for a in ANNOTATIONS if a.name not in ("auth-url", "enable-global-auth"))


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    parsed.enable_global_auth = is_true(values.get("enable-global-auth", "true"))
    if "auth-url" not in values:
        for name in _OPTIONS:
            if name in values:
                parsed.warn(name, "has no effect without auth-url; ignored")
        return
    if "auth-cache-duration" in values and "auth-cache-key" not in values:
        parsed.warn("auth-cache-duration", "has no effect without auth-cache-key; ignored")
    parsed.external_auth = replace(_external_auth(values), keepalive=_keepalive(values, parsed),
                                   snippet=values.get("auth-snippet"))
    if "auth-proxy-set-headers" in values:
        parsed.auth_proxy_set_headers = values["auth-proxy-set-headers"]


def _keepalive(values: Mapping[str, str], parsed: IngressAnnotations) -> AuthKeepalive | None:
    connections = int(values.get("auth-keepalive", "0"))
    if connections and "$" in values["auth-url"]:
        # As ingress-nginx: kept connections need one fixed host, which a variable is not.
        parsed.warn("auth-keepalive", "is ignored: auth-url holds nginx variables, so its host is known per request "
                                      "only")
        connections = 0
    if connections == 0:
        for name in ("auth-keepalive-share-vars", "auth-keepalive-requests", "auth-keepalive-timeout"):
            if name in values:
                parsed.warn(name, "has no effect without auth-keepalive above 0; ignored")
        return None
    keepalive = AuthKeepalive(connections=connections, requests=int(values.get("auth-keepalive-requests", "1000")),
                              timeout=int(values.get("auth-keepalive-timeout", "60")),
                              share_vars=is_true(values.get("auth-keepalive-share-vars", "false")))
    for name, value in (("auth-keepalive-requests", keepalive.requests), ("auth-keepalive-timeout", keepalive.timeout)):
        if value == 0:
            parsed.warn(name, "is 0, which turns auth-keepalive off (as in ingress-nginx); set it above 0 to keep "
                              "connections to auth-url open")
            return None
    return keepalive
