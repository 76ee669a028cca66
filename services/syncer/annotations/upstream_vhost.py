"""upstream-vhost: the Host header sent to the backend."""
from __future__ import annotations

from .base import Annotation, Risk
from .validators import host_and_port

ANNOTATIONS = (
    Annotation("upstream-vhost", host_and_port, Risk.LOW,
               "Host header sent to the backend instead of the client's.", setting="pyngress_upstream_vhost"),
)
