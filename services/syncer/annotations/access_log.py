"""enable-access-log: "false" leaves the Ingress's requests out of the access log (ConfigMap keys decide the
log's format and destination, model/configmap_access_log.py)."""
from __future__ import annotations

from .base import Annotation, Risk, when_false
from .validators import boolean

ANNOTATIONS = (
    Annotation("enable-access-log", validate=boolean, risk=Risk.LOW, default="true",
               doc="\"false\" leaves this Ingress's requests out of the access log.", directive="access_log",
               argument=when_false("off")),
)
