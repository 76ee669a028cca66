"""service-upstream: proxy to the Service's cluster IP and port instead of its endpoints, leaving the choice
of endpoint to kube-proxy (ingress-nginx's meaning: no retries on other endpoints, no session affinity)."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk, Scope
from .validators import boolean, is_true

ANNOTATIONS = (
    Annotation("service-upstream", reloads=False, validate=boolean, risk=Risk.LOW, default="false", scope=Scope.INGRESS,
               doc="Proxy to the Service's cluster IP instead of its endpoints."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "service-upstream" in values:
        parsed.service_upstream = is_true(values["service-upstream"])
