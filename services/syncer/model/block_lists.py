"""The controller ConfigMap's block-cidrs, block-user-agents and block-referers: comma-separated lists of
what is refused with 403 on every host (ingress-nginx's global filters).

User agents and referers are exact values or nginx map regular expressions ("~regex", "~*regex" without
case). A regular expression must compile, and may use only printable ASCII; '$' (which nginx.conf cannot
hold) ends a pattern as "\\z" does, so "~*bot$" is written "~*bot\\z" and means the same for a header value.
"""
from __future__ import annotations

import re

from services.nginxconf import pcre

from ..annotations.base import InvalidValue
from ..annotations.validators import ip_network, pcre_regex

_PRINTABLE = re.compile(r"[\x20-\x7e]+")
MAX_ENTRIES = 1000


def _items(value: str) -> list[str]:
    items = [item.strip(" ") for item in value.split(",")]
    items = list(dict.fromkeys(item for item in items if item))
    if len(items) > MAX_ENTRIES:
        raise InvalidValue(f"holds {len(items)} entries, more than {MAX_ENTRIES}")
    return items


def networks(value: str) -> tuple[str, ...]:
    """"10.0.0.0/8, 192.168.1.1" → ("10.0.0.0/8", "192.168.1.1/32"), sorted."""
    parsed = {ip_network(item) for item in _items(value)}
    return tuple(str(n) for n in sorted(parsed, key=lambda n: (n.version, n)))


def header_patterns(value: str) -> tuple[str, ...]:
    """Exact values and "~regex"/"~*regex" entries, in their order."""
    return tuple(_pattern(item) for item in _items(value))


def _pattern(item: str) -> str:
    if not _PRINTABLE.fullmatch(item):
        raise InvalidValue(f"{item!r} holds characters other than printable ASCII; remove them")
    if not item.startswith("~"):
        if "$" in item:
            raise InvalidValue(f"{item!r}: '$' cannot be written into nginx.conf; match it with a regular "
                               "expression such as ~^price\\x24 instead")
        return item
    flags, body = ("~*", item[2:]) if item.startswith("~*") else ("~", item[1:])
    if body.endswith("$") and not body.endswith("\\$"):
        body = body[:-1] + "\\z"  # the same end of a header value, without the '$' nginx.conf cannot hold
    if "$" in body:
        raise InvalidValue(f"{item!r}: '$' cannot be written into nginx.conf; end a pattern with \\z, or match a "
                           "'$' with \\x24")
    pcre_regex(body, ignore_case=flags == "~*", engine=pcre.Engine.NGINX)  # an nginx map key, not ngx.re
    if not body:
        raise InvalidValue(f"{item!r} has an empty regular expression; write one after {flags}")
    return flags + body
