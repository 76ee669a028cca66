"""Proxy timeouts, request body size, buffering and HTTP/2 push: each one a plain nginx directive in the profile."""
from __future__ import annotations

from typing import Mapping

from services.nginxconf.render import size_bytes

from .base import Annotation, IngressAnnotations, LocationDirective, Risk, when_true
from .validators import boolean, duration, integer, one_of, size

# Buffers are allocated per request: a huge one would let one Ingress exhaust the workers' memory.
MAX_BUFFER_SIZE = 8 * 1024**2
# As ingress-nginx: proxy_buffers is this many buffers of proxy-buffer-size. nginx requires
# proxy_busy_buffers_size (2 buffers by default) to be less than all buffers but one, so at least 4.
BUFFERS_NUMBER = 4
MAX_BODY_SIZE = 1024**4
# The size of each response buffer when only proxy-buffers-number is given: the template's default.
DEFAULT_BUFFER_SIZE = "4k"

ANNOTATIONS = (
    Annotation("proxy-connect-timeout", validate=duration, risk=Risk.LOW, default="5s",
               doc="Timeout for connecting to the backend.", directive="proxy_connect_timeout"),
    Annotation("proxy-send-timeout", validate=duration, risk=Risk.LOW, default="60s",
               doc="Timeout between two writes to the backend.", directive="proxy_send_timeout"),
    Annotation("proxy-read-timeout", validate=duration, risk=Risk.LOW, default="60s",
               doc="Timeout between two reads from the backend.", directive="proxy_read_timeout"),
    Annotation("proxy-body-size", validate=size(MAX_BODY_SIZE), risk=Risk.LOW, default="1m",
               doc="Largest request body accepted; 0 means no limit.", directive="client_max_body_size"),
    Annotation("proxy-buffering", validate=one_of("on", "off"), risk=Risk.LOW, default="off",
               doc="Buffer responses from the backend.", directive="proxy_buffering"),
    Annotation("proxy-buffer-size", validate=size(MAX_BUFFER_SIZE, min_bytes=1024), risk=Risk.LOW, default="4k",
               doc=f"Buffer for the first part of the backend's response (its headers), and the size of each of the "
               f"proxy-buffers-number (default {BUFFERS_NUMBER}) proxy_buffers.", directive="proxy_buffer_size"),
    Annotation("proxy-request-buffering", validate=one_of("on", "off"), risk=Risk.LOW, default="on",
               doc="Read the whole request body before proxying it.", directive="proxy_request_buffering"),
    Annotation("proxy-http-version", validate=one_of("1.0", "1.1"), risk=Risk.LOW, default="1.1",
               doc="HTTP version spoken to the backend.", directive="proxy_http_version"),
    Annotation("proxy-buffers-number", validate=integer(BUFFERS_NUMBER, 1024), risk=Risk.LOW, default="4",
               doc="How many response buffers of proxy-buffer-size each request gets."),
    Annotation("proxy-busy-buffers-size", validate=size(MAX_BUFFER_SIZE, min_bytes=1024), risk=Risk.LOW,
               doc="How much of the buffers may be busy sending to the client before the response is read whole.",
               directive="proxy_busy_buffers_size"),
    Annotation("proxy-max-temp-file-size", validate=size(1024**4), risk=Risk.LOW, default="1024m",
               doc="Largest temporary file for a buffered response; 0 turns buffering to files off.",
               directive="proxy_max_temp_file_size"),
    Annotation("client-body-buffer-size", validate=size(MAX_BUFFER_SIZE, min_bytes=1024), risk=Risk.LOW, default="8k",
               doc="Request bodies up to this size stay in memory; larger ones go to a temporary file.",
               directive="client_body_buffer_size"),
    Annotation("http2-push-preload", validate=boolean, risk=Risk.LOW, default="false",
               doc="Over HTTP/2, push the resources named by the backend's \"Link: <...>; rel=preload\" headers "
                   "with the answer.", directive="http2_push_preload", argument=when_true("on")),
)


def apply(values: Mapping[str, str], parsed: IngressAnnotations) -> None:
    # proxy_buffers is proxy-buffers-number buffers of proxy-buffer-size, as in ingress-nginx; written with
    # either, since a proxy_buffer_size above the inherited proxy_buffers ("4 4k") fails `nginx -t`.
    if "proxy-buffer-size" in values or "proxy-buffers-number" in values:
        number = values.get("proxy-buffers-number", str(BUFFERS_NUMBER))
        parsed.add("proxy_buffers", value=f"{number} {values.get('proxy-buffer-size', DEFAULT_BUFFER_SIZE)}",
                   source="proxy-buffer-size" if "proxy-buffer-size" in values else "proxy-buffers-number")


def buffer_problem(directives: list[LocationDirective]) -> tuple[str, str] | None:
    """(annotation to blame, why) when the profile's response buffers break a rule `nginx -t` enforces,
    taking the template's defaults for what the annotations leave unset; None when they are consistent."""
    by_name = {d.name: d for d in directives}
    if not by_name.keys() & {"proxy_buffer_size", "proxy_buffers", "proxy_busy_buffers_size",
                             "proxy_max_temp_file_size"}:
        return None
    buffers = by_name.get("proxy_buffers")
    number_text, each_text = (buffers.value.split() if buffers else (str(BUFFERS_NUMBER), DEFAULT_BUFFER_SIZE))
    number, each = int(number_text), size_bytes(each_text)
    first = by_name.get("proxy_buffer_size")
    largest = max(size_bytes(first.value) if first else size_bytes(DEFAULT_BUFFER_SIZE), each)
    busy = by_name.get("proxy_busy_buffers_size")
    busy_bytes = size_bytes(busy.value) if busy else 2 * largest  # nginx's default: two buffers
    blame = busy.source if busy else (buffers.source if buffers else "proxy-buffer-size")
    if busy_bytes < largest:
        return blame, (f"proxy-busy-buffers-size must be at least {largest} bytes, the larger of "
                       "proxy-buffer-size and one of the proxy_buffers")
    if busy_bytes >= (number - 1) * each:
        return blame, (f"the busy buffers ({busy_bytes} bytes) must be fewer than all {number} buffers of {each} "
                       "bytes but one: lower proxy-busy-buffers-size or raise proxy-buffers-number")
    temp = by_name.get("proxy_max_temp_file_size")
    # nginx's temporary file is written in steps of two buffers (proxy_temp_file_write_size's default).
    if temp and 0 < size_bytes(temp.value) < 2 * largest:
        return temp.source, (f"proxy-max-temp-file-size must be 0 (no temporary file) or at least {2 * largest} "
                             "bytes, two of the largest buffers")
    return None
