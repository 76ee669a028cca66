"""Proxy timeouts, request body size and buffering: each one a plain nginx directive in the profile."""
from __future__ import annotations

from typing import Mapping

from .base import Annotation, IngressAnnotations, Risk
from .validators import duration, one_of, size

# Buffers are allocated per request: a huge one would let one Ingress exhaust the workers' memory.
MAX_BUFFER_SIZE = 8 * 1024**2
# As ingress-nginx: proxy_buffers is this many buffers of proxy-buffer-size. nginx requires
# proxy_busy_buffers_size (2 buffers by default) to be less than all buffers but one, so at least 4.
BUFFERS_NUMBER = 4
MAX_BODY_SIZE = 1024**4

ANNOTATIONS = (
    Annotation("proxy-connect-timeout", validate=duration, risk=Risk.LOW,
               doc="Timeout for connecting to the backend.", directive="proxy_connect_timeout"),
    Annotation("proxy-send-timeout", validate=duration, risk=Risk.LOW,
               doc="Timeout between two writes to the backend.", directive="proxy_send_timeout"),
    Annotation("proxy-read-timeout", validate=duration, risk=Risk.LOW,
               doc="Timeout between two reads from the backend.", directive="proxy_read_timeout"),
    Annotation("proxy-body-size", validate=size(MAX_BODY_SIZE), risk=Risk.LOW,
               doc="Largest request body accepted; 0 means no limit.", directive="client_max_body_size"),
    Annotation("proxy-buffering", validate=one_of("on", "off"), risk=Risk.LOW,
               doc="Buffer responses from the backend.", directive="proxy_buffering"),
    Annotation("proxy-buffer-size", validate=size(MAX_BUFFER_SIZE, min_bytes=1024), risk=Risk.LOW,
               doc=f"Buffer for the first part of the backend's response (its headers), and the size of the "
               f"{BUFFERS_NUMBER} proxy_buffers.", directive="proxy_buffer_size"),
    Annotation("proxy-request-buffering", validate=one_of("on", "off"), risk=Risk.LOW,
               doc="Read the whole request body before proxying it.", directive="proxy_request_buffering"),
    Annotation("proxy-http-version", validate=one_of("1.0", "1.1"), risk=Risk.LOW,
               doc="HTTP version spoken to the backend.", directive="proxy_http_version"),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # Without it, a proxy_buffer_size above the inherited proxy_buffers ("4 4k") fails `nginx -t`.
    if "proxy-buffer-size" in values:
        parsed.add("proxy_buffers", value=f"{BUFFERS_NUMBER} {values['proxy-buffer-size']}",
                   source="proxy-buffer-size")
