"""enable-access-log: "false" leaves the Ingress's requests out of the access log (ConfigMap keys decide the
log's format and destination, configmap.py)."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .validators import boolean, is_true

ANNOTATIONS = (
    Annotation("enable-access-log", validate=boolean, risk=Risk.LOW,
               doc="\"false\" leaves this Ingress's requests out of the access log."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    if "enable-access-log" in values and not is_true(values["enable-access-log"]):
        parsed.add("access_log", value="off", source="enable-access-log")
