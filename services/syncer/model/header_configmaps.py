"""ConfigMaps of headers: the controller ConfigMap's add-headers and proxy-set-headers name one ("NAMESPACE/NAME",
in the controller ConfigMap's namespace, where the watcher keeps them) whose entries are headers, sent to every
client (add-headers) or to every backend (proxy-set-headers), as in ingress-nginx; an Ingress's
auth-proxy-set-headers names one in its own namespace, whose headers go to its auth-url service.

Names are header names; values are printable text, in which nginx variables are evaluated as ingress-nginx's
template lets nginx evaluate them (its user guide's `X-Request-Start: t=${msec}`), each checked against the
variables nginx defines (services/nginxconf/variables.py); except in custom-headers, whose values ingress-nginx sends as
written, `$` included (render.literal). The headers pyngress sets for every backend itself (Host, X-Forwarded-*, ...) cannot be
replaced this way: an entry naming one is refused with the reason.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..annotations.base import InvalidValue
from services.nginxconf.variables import has_stray_dollar, unknown_variables

_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,128}")
_VALUE = re.compile(r"[\x20-\x7e]{0,4096}")  # printable ASCII
_REFERENCE = re.compile(r"([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)/([a-z0-9](?:[-a-z0-9.]{0,251}[a-z0-9])?)")


def configmap_reference(value: str) -> str:
    """The key's value: NAMESPACE/NAME of a ConfigMap."""
    if not _REFERENCE.fullmatch(value):
        raise InvalidValue("must be NAMESPACE/NAME of a ConfigMap of headers, such as ingress-nginx/custom-headers")
    return value


def object_reference(value: str) -> str:
    """NAMESPACE/NAME of a Secret (ssl-dh-param)."""
    if not _REFERENCE.fullmatch(value):
        raise InvalidValue("must be NAMESPACE/NAME of a Secret, such as ingress-nginx/dhparam")
    return value


def headers_of(store: Mapping[str, dict[str, Any]], reference: str, *, source: str, where_kept: str,
               reserved: frozenset[str], literal_dollar: bool = False) -> tuple[tuple[tuple[str, str], ...], list[str]]:
    """The headers of the ConfigMap `reference` ("NAMESPACE/NAME"; sorted by name), and a message per entry or
    ConfigMap refused, each starting with `source` (what named it); `where_kept` says where it must be.
    `literal_dollar`: a `$` is taken as text (to be rendered with render.literal)."""
    namespace, name = reference.split("/")
    obj = store.get(f"ConfigMap/{namespace}/{name}")
    if obj is None:
        return (), [f"{source}: ConfigMap {reference} not found (it must be {where_kept}); no headers from it"]
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        return (), [f"{source}: ConfigMap {reference} data must be a map of strings; no headers from it"]
    headers, problems = [], []
    for header, value in sorted(data.items()):
        where = f"{source}: ConfigMap {reference} entry {header!r}"
        if not isinstance(header, str) or not _HEADER_NAME.fullmatch(header):
            problems.append(f"{where}: not a header name (letters, digits and '-'); skipped")
        elif header.lower() in reserved:
            problems.append(f"{where}: pyngress sets this header itself; skipped")
        elif not isinstance(value, str) or not _VALUE.fullmatch(value):
            problems.append(f"{where}: the value must be printable text; skipped")
        elif not literal_dollar and (wrong := _variable_problem(value)):
            problems.append(f"{where}: {wrong}; skipped")
        else:
            headers.append((header, value))
    return tuple(headers), problems


def _variable_problem(value: str) -> str | None:
    """Why nginx could not evaluate the variables of header value `value`, if it could not."""
    unknown = unknown_variables(value)
    if unknown:
        return (f"names variables nginx does not define: {', '.join('$' + name for name in unknown)} (use nginx's "
                "variables, such as $msec, $request_id, $remote_addr or $http_<header>)")
    if has_stray_dollar(value):
        return "has a $ that starts no variable name; variables are $name or ${name}"
    return None
