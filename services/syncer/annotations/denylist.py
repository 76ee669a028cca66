"""denylist-source-range: these client networks get 403 on the Ingress's paths.

Written as `deny` rules before those of allowlist-source-range, as ingress-nginx orders them: a network
both denied and allowed is denied.
"""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .ipallowlist import cidr_list

ANNOTATIONS = (
    Annotation("denylist-source-range", validate=cidr_list, risk=Risk.MEDIUM,
               doc="Client networks refused with 403."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if values.get("denylist-source-range"):
        parsed.denied = tuple(values["denylist-source-range"].split(" "))
