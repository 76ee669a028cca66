"""ConfigMaps of headers: the controller ConfigMap's add-headers and proxy-set-headers name one ("NAMESPACE/NAME",
in the controller ConfigMap's namespace, where the watcher keeps them) whose entries are headers, sent to every
client (add-headers) or to every backend (proxy-set-headers), as in ingress-nginx; an Ingress's
auth-proxy-set-headers names one in its own namespace, whose headers go to its auth-url service.

Names are header names; values are literal text: control characters are refused, and so is a `$` (nginx
variables are not taken) except in custom-headers, whose values ingress-nginx sends as written, `$` included
(render.literal). The headers pyngress sets for every backend itself (Host, X-Forwarded-*, ...) cannot be
replaced this way: an entry naming one is refused with the reason.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from ..annotations.base import InvalidValue

_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,128}")
_VALUE = re.compile(r"[\x20-\x23\x25-\x7e]{0,4096}")  # printable ASCII but `$`
_LITERAL_VALUE = re.compile(r"[\x20-\x7e]{0,4096}")  # printable ASCII
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
    value_pattern = _LITERAL_VALUE if literal_dollar else _VALUE
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
        elif not isinstance(value, str) or not value_pattern.fullmatch(value):
            wanted = "printable text" if literal_dollar else "printable text without '$' (nginx variables are not taken)"
            problems.append(f"{where}: the value must be {wanted}; skipped")
        else:
            headers.append((header, value))
    return tuple(headers), problems
