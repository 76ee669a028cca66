"""How a route's endpoint is chosen: load-balance and upstream-hash-by, ingress-nginx's names.
- load-balance: round_robin (the default) or ewma: the better of two random endpoints by a decaying average of
  their response times, per worker (templates/lua/pyngress/ewma.lua);
- upstream-hash-by: a key made of nginx variables (an allow-list, such as $request_uri, $remote_addr,
  $http_x_user, $cookie_session, $arg_id) picks the endpoint by rendezvous hashing in Lua, so the same key
  keeps its endpoint and only the keys of a removed endpoint move; with upstream-hash-by-subset the key picks
  a subset of upstream-hash-by-subset-size endpoints (default 3), and a random one of them serves."""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk, Scope
from .validators import boolean, integer, is_true, one_of

# Variables whose value is the request's own: no internal state of nginx or of another tenant.
_VARIABLE = r"\$(?:request_uri|uri|args|host|remote_addr|binary_remote_addr|scheme|request_method|" \
            r"(?:http|cookie|arg)_[a-z0-9_]{1,64})"
_HASH_KEY = re.compile(rf"(?:{_VARIABLE}|[A-Za-z0-9_.:/-])+")


def hash_key(value: str) -> str:
    if len(value) > 256 or not _HASH_KEY.fullmatch(value) or "$" not in value:
        raise InvalidValue("must be nginx variables of the request ($request_uri, $uri, $args, $host, $remote_addr, "
                           "$binary_remote_addr, $scheme, $request_method, $http_<name>, $cookie_<name>, $arg_<name>), "
                           "optionally with plain characters between them, such as $request_uri or $http_x_user")
    return value


ANNOTATIONS = (
    Annotation("load-balance", validate=one_of("round_robin", "ewma"), risk=Risk.LOW, default="round_robin",
               scope=Scope.INGRESS, reloads=False,
               doc="round_robin, or ewma (the faster of two random endpoints, by their recent response times)."),
    Annotation("upstream-hash-by", validate=hash_key, risk=Risk.MEDIUM, scope=Scope.INGRESS, reloads=False,
               doc="Consistent hashing of the endpoints on this key of nginx variables.",
               differs="Request variables only, hashed with rendezvous hashing rather than ingress-nginx's "
                       "consistent-hash ring: a key may reach another endpoint than under ingress-nginx."),
    Annotation("upstream-hash-by-subset", validate=boolean, risk=Risk.LOW, scope=Scope.INGRESS, reloads=False,
               doc="The key picks a subset of endpoints, a random one of which serves."),
    Annotation("upstream-hash-by-subset-size", validate=integer(1, 1000), risk=Risk.LOW,
               scope=Scope.INGRESS, reloads=False,
               doc="The size of those subsets (default 3)."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    parsed.ewma = values.get("load-balance") == "ewma"
    parsed.hash_by = values.get("upstream-hash-by")
    if parsed.hash_by and is_true(values.get("upstream-hash-by-subset", "false")):
        parsed.hash_subset_size = int(values.get("upstream-hash-by-subset-size", "3"))
