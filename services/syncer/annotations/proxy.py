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
    Annotation("proxy-connect-timeout", duration, Risk.LOW,
               "Timeout for connecting to the backend.", directive="proxy_connect_timeout"),
    Annotation("proxy-send-timeout", duration, Risk.LOW,
               "Timeout between two writes to the backend.", directive="proxy_send_timeout"),
    Annotation("proxy-read-timeout", duration, Risk.LOW,
               "Timeout between two reads from the backend.", directive="proxy_read_timeout"),
    Annotation("proxy-body-size", size(MAX_BODY_SIZE), Risk.LOW,
               "Largest request body accepted; 0 means no limit.", directive="client_max_body_size"),
    Annotation("proxy-buffering", one_of("on", "off"), Risk.LOW,
               "Buffer responses from the backend.", directive="proxy_buffering"),
    Annotation("proxy-buffer-size", size(MAX_BUFFER_SIZE, min_bytes=1024), Risk.LOW,
               f"Buffer for the first part of the backend's response (its headers), and the size of the "
               f"{BUFFERS_NUMBER} proxy_buffers.", directive="proxy_buffer_size"),
    Annotation("proxy-request-buffering", one_of("on", "off"), Risk.LOW,
               "Read the whole request body before proxying it.", directive="proxy_request_buffering"),
    Annotation("proxy-http-version", one_of("1.0", "1.1"), Risk.LOW,
               "HTTP version spoken to the backend.", directive="proxy_http_version"),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # Without it, a proxy_buffer_size above the inherited proxy_buffers ("4 4k") fails `nginx -t`.
    if "proxy-buffer-size" in values:
        parsed.add("proxy_buffers", f"{BUFFERS_NUMBER} {values['proxy-buffer-size']}", "proxy-buffer-size")
