"""allowlist-source-range (and its old name whitelist-source-range): only these client networks get in."""
from __future__ import annotations

import ipaddress
from typing import Mapping

from .base import Annotation, IngressAnnotations, InvalidValue, Risk


def _cidr_list(value: str) -> str:
    """"10.0.0.0/8, 192.168.1.1" → "10.0.0.0/8 192.168.1.1/32": networks, deduplicated and sorted."""
    networks = set()
    for part in value.split(","):
        text = part.strip(" ")
        try:
            # strict=False: "10.1.2.3/8" means its network, as Go's net.ParseCIDR (ingress-nginx) reads it.
            networks.add(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise InvalidValue(f"{text!r} is not an IP address or CIDR; write a comma-separated list "
                               "such as 10.0.0.0/8, 192.168.1.1, 2001:db8::/32") from None
    return " ".join(str(n) for n in sorted(networks, key=lambda n: (n.version, n)))


ANNOTATIONS = (
    Annotation("allowlist-source-range", _cidr_list, Risk.MEDIUM, "Client networks allowed; others get 403."),
    Annotation("whitelist-source-range", _cidr_list, Risk.MEDIUM, "Old name of allowlist-source-range."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    ranges = values.get("allowlist-source-range") or values.get("whitelist-source-range")
    if ranges:
        if "allowlist-source-range" in values and "whitelist-source-range" in values:
            parsed.warn("whitelist-source-range", "is overridden by allowlist-source-range")
        # nginx's access module: the first matching rule wins, so every allow comes before the deny
        # (the sorted profile settings keep "allow" before "deny").
        for network in ranges.split(" "):
            parsed.add("allow", network)
        parsed.add("deny", "all")
