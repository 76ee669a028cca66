"""Snippet annotations: raw nginx configuration from an Ingress.

A snippet lets whoever may edit an Ingress run any nginx directive (read files, proxy anywhere, leak other
tenants' secrets: CVE-2021-25742, CVE-2025-1974). As in ingress-nginx, every *-snippet annotation rejects
its Ingress unless the controller ConfigMap sets allow-snippet-annotations: "true"; their risk is Critical,
so annotations-risk-level: Critical is needed too. Then each goes in as it is, once it is shown to stay inside
its block (services/nginxconf/snippet_blocks.py): configuration-snippet into the Ingress's location,
auth-snippet into the location of its auth-url request (external_auth.py), server-snippet into a server block
of each of the Ingress's hosts (the oldest Ingress's, when several set one for a host, as in ingress-nginx),
stream-snippet into nginx's stream block. `nginx -t` then rejects only its Ingress if nginx refuses it.
modsecurity-snippet, ModSecurity's own configuration, is modsecurity.py's.
"""
from __future__ import annotations

from typing import Mapping

from services.nginxconf.snippet_blocks import SnippetError, check_contained

from .base import Annotation, IngressAnnotations, InvalidValue, Risk, SERVER_BLOCK_OWNER

# Snippets are whole blocks of configuration; this bounds what one Ingress adds to every nginx -t and reload.
MAX_SNIPPET = 16 * 1024

DISABLED = ('snippet annotations are disabled: remove it, or have the cluster administrator set '
            'allow-snippet-annotations: "true" and annotations-risk-level: Critical in the controller ConfigMap')


def _configuration_snippet(value: str) -> str:
    if len(value) > MAX_SNIPPET:
        raise InvalidValue(f"is {len(value)} characters long, more than {MAX_SNIPPET}; shorten it")
    try:
        check_contained(value)
    except SnippetError as err:
        raise InvalidValue(str(err)) from None
    return value


ANNOTATIONS = (
    Annotation("configuration-snippet", validate=_configuration_snippet, risk=Risk.CRITICAL,
               doc="Raw nginx configuration added to the Ingress's location; needs allow-snippet-annotations "
               "and annotations-risk-level Critical.",
               differs="Lua *_by_lua_block blocks are refused (use the quoted *_by_lua forms); a snippet that opens "
                       "a block it does not close, or that nginx -t refuses, rejects only its Ingress."),
    Annotation("server-snippet", validate=_configuration_snippet, risk=Risk.CRITICAL,
               doc="Raw nginx configuration added to the server block of the Ingress's hosts; needs "
               "allow-snippet-annotations and annotations-risk-level Critical.",
               differs=SERVER_BLOCK_OWNER),
    Annotation("auth-snippet", validate=_configuration_snippet, risk=Risk.CRITICAL,
               doc="Raw nginx configuration added to the location of the auth-url request; needs "
               "allow-snippet-annotations and annotations-risk-level Critical."),
    Annotation("stream-snippet", validate=_configuration_snippet, risk=Risk.CRITICAL,
               doc="Raw nginx configuration added to nginx's stream block (stream servers); needs "
               "allow-snippet-annotations and annotations-risk-level Critical."),
)


def is_snippet(name: str) -> bool:
    """Whether the annotation `name` (without the prefix) is raw configuration, as ingress-nginx tells them."""
    return name.endswith("-snippet")


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "auth-snippet" in values and "auth-url" not in values:
        parsed.warn("auth-snippet", "has no effect without auth-url; ignored")
    if "configuration-snippet" in values:
        parsed.snippet = values["configuration-snippet"]
    parsed.server_snippet = values.get("server-snippet")
    parsed.stream_snippet = values.get("stream-snippet")
