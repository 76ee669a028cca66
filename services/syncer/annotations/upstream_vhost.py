"""upstream-vhost: the Host header sent to the backend."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .validators import host_and_port

ANNOTATIONS = (
    Annotation("upstream-vhost", validate=host_and_port, risk=Risk.LOW,
               doc="Host header sent to the backend instead of the client's."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "upstream-vhost" in values:
        parsed.add("proxy_set_header", value=f"Host {values['upstream-vhost']}", source="upstream-vhost")
