"""allowlist-source-range (and its old name whitelist-source-range): only these client networks get in."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .validators import ip_network


def cidr_list(value: str) -> str:
    """"10.0.0.0/8, 192.168.1.1" → "10.0.0.0/8 192.168.1.1/32": networks, deduplicated and sorted."""
    networks = {ip_network(part.strip(" ")) for part in value.split(",")}
    return " ".join(str(n) for n in sorted(networks, key=lambda n: (n.version, n)))


ANNOTATIONS = (
    Annotation("allowlist-source-range", validate=cidr_list, risk=Risk.MEDIUM,
               doc="Client networks allowed; others get 403."),
    Annotation("whitelist-source-range", validate=cidr_list, risk=Risk.MEDIUM,
               doc="Old name of allowlist-source-range."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    source = "allowlist-source-range" if "allowlist-source-range" in values else "whitelist-source-range"
    ranges = values.get(source)
    if ranges:
        if source == "allowlist-source-range" and "whitelist-source-range" in values:
            parsed.warn("whitelist-source-range", "is overridden by allowlist-source-range")
        # nginx's access module: the first matching rule wins, so every allow comes before the deny
        # (the sorted profile settings keep "allow" before "deny").
        for network in ranges.split(" "):
            parsed.add("allow", value=network, source=source)
        parsed.add("deny", value="all", source=source)
