"""What tracing.lua records of a request becomes an OpenTelemetry SDK span with the HTTP server semantic
conventions' attributes; a record that is not tracing.lua's is refused, never exported half-read."""
from __future__ import annotations

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import SpanKind, StatusCode

from services.nginxconf.tracing import FIELDS_SEPARATOR, JOINED_VARIABLES
from services.tracer.nginx_spans import BadRecord, span_of

TRACE, SPAN, PARENT = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00f067aa0ba902b7"
RESOURCE = Resource.create({"service.name": "edge"})


def record(*, parent: str = PARENT, name: str = "/api", **fields: str) -> list:
    values = {"status": "200", "request_method": "GET", "scheme": "https", "host": "shop.example.com",
              "pyngress_server_port": "443", "server_protocol": "HTTP/2.0", "remote_addr": "203.0.113.9",
              "realip_remote_addr": "10.0.0.1", "remote_port": "51000", "upstream_addr": "10.1.2.3:8080",
              "upstream_response_time": "0.004",
              "bytes_sent": "612", "request_length": "310",
              "pyngress_metric": "shop.example.com\tshop\tfront\tweb\t/api\t", **fields}
    return [TRACE + SPAN + parent + name, FIELDS_SEPARATOR.join(values[v] for v in JOINED_VARIABLES),
            "/api/items?page=2", "curl/8.0", 1700000000.123, 1700000000.250]


def test_a_record_is_a_server_span_with_the_semantic_conventions():
    span = span_of(record(), RESOURCE)
    assert span.name == "/api" and span.kind is SpanKind.SERVER
    assert (span.context.trace_id, span.context.span_id, span.parent.span_id) == (
        int(TRACE, 16), int(SPAN, 16), int(PARENT, 16))
    assert (span.start_time, span.end_time) == (1700000000123000000, 1700000000250000000)
    assert span.resource.attributes["service.name"] == "edge"
    assert dict(span.attributes) == {
        "http.request.method": "GET", "http.response.status_code": 200, "http.route": "/api",
        "url.scheme": "https", "url.path": "/api/items", "url.query": "page=2",
        "server.address": "shop.example.com", "server.port": 443, "client.address": "203.0.113.9",
        "network.peer.address": "10.0.0.1", "network.peer.port": 51000, "network.protocol.name": "http",
        "network.protocol.version": "2", "user_agent.original": "curl/8.0", "http.request.size": 310,
        "http.response.size": 612, "pyngress.upstream.address": "10.1.2.3:8080",
        "pyngress.upstream.response_time": "0.004", "pyngress.ingress": "shop/front",
        "pyngress.service": "web"}
    assert span.status.status_code is StatusCode.UNSET


def test_a_root_span_has_no_parent_and_a_5xx_is_an_error():
    span = span_of(record(parent="0" * 16, status="502"), RESOURCE)
    assert span.parent is None and span.status.status_code is StatusCode.ERROR


def test_a_made_up_method_is_other_with_the_original_beside_it():
    attributes = span_of(record(request_method="BREW"), RESOURCE).attributes
    assert (attributes["http.request.method"], attributes["http.request.method_original"]) == ("_OTHER", "BREW")


def test_a_request_no_route_took_has_no_route_attributes():
    attributes = span_of(record(pyngress_metric="", upstream_addr=""), RESOURCE).attributes
    assert not {"http.route", "pyngress.ingress", "pyngress.upstream.address"} & set(attributes)


@pytest.mark.parametrize("bad", [
    "not a list", [1, 2], ["x" * 64, "", "/", "", 1, 2],
    [TRACE + SPAN + "zz" * 8 + "n", record()[1], "/", "", 1.0, 2.0],
    ["0" * 32 + SPAN + PARENT, record()[1], "/", "", 1.0, 2.0],
    [TRACE + SPAN + PARENT, "200\tGET", "/", "", 1.0, 2.0],
])
def test_a_record_that_is_not_tracing_luas_is_refused(bad):
    with pytest.raises(BadRecord):
        span_of(bad, RESOURCE)
