"""The controller ConfigMap's snippets: raw nginx configuration from the cluster administrator.

As in ingress-nginx they apply whatever allow-snippet-annotations says: the ConfigMap is the administrator's,
not a tenant's. Each goes where ingress-nginx puts it (templates/nginx.conf.j2): main-snippet into the main
context, http-snippet into the http block, server-snippet into every server block that serves Ingresses,
location-snippet into every location a request to an Ingress goes through (the routing location and each
profile's), stream-snippet into the stream block. Each must stay inside its block (snippet_blocks.py), as the
annotation snippets must; one that nginx -t refuses is reported and its previous value keeps applying
(nginx_apply/applier.py).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from services.nginxconf.config import NginxConfig, ServerSettings
from services.nginxconf.snippet_blocks import SnippetError, check_contained

from ..annotations.base import InvalidValue

# ConfigMap key → ServerSettings field.
SNIPPET_KEYS: dict[str, str] = {
    "main-snippet": "main_snippet",
    "http-snippet": "http_snippet",
    "server-snippet": "server_snippet",
    "location-snippet": "location_snippet",
    "stream-snippet": "stream_snippet",
}


def contained_snippet(value: str) -> str:
    """`value` when it closes every block it opens and leaves nothing open; InvalidValue saying what to change."""
    try:
        check_contained(value)
    except SnippetError as err:
        raise InvalidValue(str(err)) from None
    return value


# Raw configuration only `nginx -t` can judge whole, by ConfigMap key: the snippets, and modsecurity-snippet (its
# directives are checked by configmap_modsecurity.py, their syntax by ModSecurity as nginx loads them).
NGINX_TESTED_KEYS: dict[str, str] = {**SNIPPET_KEYS, "modsecurity-snippet": "modsecurity_snippet"}


def snippets_of(server: ServerSettings) -> dict[str, str]:
    """The ConfigMap snippets of `server` (NGINX_TESTED_KEYS), by ConfigMap key."""
    return {key: getattr(server, target) for key, target in NGINX_TESTED_KEYS.items()}


def with_snippets(config: NginxConfig, snippets: Mapping[str, str]) -> NginxConfig:
    """`config` with these ConfigMap snippets (by key; a key left out: none)."""
    fields: dict[str, Any] = {target: snippets.get(key, "") for key, target in NGINX_TESTED_KEYS.items()}
    return replace(config, server=replace(config.server, **fields))
