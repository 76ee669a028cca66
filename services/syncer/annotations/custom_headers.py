"""custom-headers: a ConfigMap (NAME, or NAMESPACE/NAME) whose entries are headers sent with every answer of
the Ingress's locations, as ingress-nginx does; each header must be listed in the controller ConfigMap's
global-allowed-response-headers (none by default), so that a tenant cannot set what the administrator did not
allow (Set-Cookie for another site, security headers of the platform). Resolved per Ingress
(services/syncer/model/auth_secrets.py); a missing ConfigMap or a header not allowed denies the paths (503)."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .validators import configmap_name

ANNOTATIONS = (
    Annotation("custom-headers", validate=configmap_name, risk=Risk.MEDIUM,
               doc="A ConfigMap of headers set on every answer, replacing the backend's of the same name; values "
                   "are sent as written, `$` included (each header allowed by the ConfigMap's "
                   "global-allowed-response-headers)."),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    parsed.custom_headers = values.get("custom-headers")
