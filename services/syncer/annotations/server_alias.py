"""server-alias: more names for the hosts of an Ingress ("a.example.com,*.b.example.com"), served with the
routes of its first host, as ingress-nginx adds them to that host's server_name. A name that is a host of any
Ingress (or another Ingress's alias, the older one winning) is skipped with a warning: a real host always
takes its name back. Served from the routes table (no reload); on HTTPS with the host's certificate when it
names the alias. nginx's regular-expression server names are not taken: pyngress routes by exact and
wildcard names in Lua."""
from __future__ import annotations

import re
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk, Scope

_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
# A single label ("bar") is a name too: ingress-nginx adds it to server_name, and a client may send it (a search
# domain, /etc/hosts); a wildcard needs a domain under it.
_ALIAS = re.compile(rf"(?=.{{1,253}}$)(?:\*\.{_LABEL}(?:\.{_LABEL})+|{_LABEL}(?:\.{_LABEL})*)")


def _aliases(value: str) -> str:
    names = [name.strip().lower() for name in value.split(",") if name.strip()]
    bad = [name for name in names if not _ALIAS.fullmatch(name)]
    if not names or bad:
        raise InvalidValue(f"{', '.join(map(repr, bad)) or 'it'} is not a host name: write comma-separated names such "
                           "as www.example.com or *.example.com (nginx regular expressions are not taken)")
    return ",".join(dict.fromkeys(names))


ANNOTATIONS = (
    Annotation("server-alias", validate=_aliases, risk=Risk.HIGH, scope=Scope.HOST, reloads=False,
               doc="More host names (comma-separated) served with the routes of the Ingress's first host.",
               differs="nginx regular-expression names are ignored with a warning (exact and wildcard names only), and "
                       "an alias is taken only from the namespace that owns the host (ingress-nginx merges it from "
                       "any)."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "server-alias" in values:
        parsed.server_aliases = tuple(values["server-alias"].split(","))
