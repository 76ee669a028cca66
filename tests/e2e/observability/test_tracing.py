"""OpenTelemetry tracing through the whole controller (issue 35): nginx's Lua makes a span per sampled request and
the tracer process exports it over OTLP to a test collector built on the OpenTelemetry protobuf definitions
(tests/support/otlp_receiver.py). The collector gets exactly one span per sampled request, with the HTTP server
semantic conventions' attributes and the client's span as its parent; the backend gets a traceparent naming that
span; an Ingress that does not trust incoming spans starts a new trace; no span is sent when nothing is sampled; and
a collector that is down changes nothing for clients while the tracer's queue stays bounded."""
from __future__ import annotations

import itertools
import re
import time
from typing import Iterator

import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support import k8s
from tests.support.controller import start_manifests_controller
from tests.support.net import wait_for
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan

SHOP, UNTRUSTED, QUIET = "shop.tracing.example.com", "untrusted.tracing.example.com", "quiet.tracing.example.com"
CONFIGMAP = "ingress/controller"
CLIENT_TRACE, CLIENT_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
CLIENT_PARENT = f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"
TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-(0[01])")
QUEUE_SIZE = 100
_applied = itertools.count(1)


@pytest.fixture(scope="module")
def receiver() -> Iterator[OtlpReceiver]:
    receiver = OtlpReceiver().start()
    yield receiver
    receiver.stop()


def otel_configmap(receiver: OtlpReceiver, **data: str) -> dict:
    return k8s.config_map("controller", {
        "enable-opentelemetry": "true", "otlp-collector-host": receiver.host, "otlp-collector-port": str(receiver.port),
        "otel-sampler": "AlwaysOn", "otel-schedule-delay-millis": "100", "otel-service-name": "edge",
        "otel-max-queuesize": str(QUEUE_SIZE), "otel-max-export-batch-size": "20", **data}, namespace="ingress")


def reconfigure(stage: Stage, receiver: OtlpReceiver, **data: str) -> None:
    """Apply the ConfigMap with `data` and wait until nginx serves it (each application names the service apart)."""
    configmap = otel_configmap(receiver, **{"otel-service-name": f"edge-{next(_applied)}", **data})
    stage.cluster.apply(configmap)
    wait_for(lambda: f'"{configmap["data"]["otel-service-name"]}"'.encode() in stage.controller.nginx_conf(), 30,
             what="the ConfigMap in nginx.conf")
    stage.controller.settled_reloads()


@pytest.fixture(scope="module")
def stage(tmp_path_factory, echo, receiver) -> Iterator[Stage]:
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("tracing"), [f"--configmap={CONFIGMAP}"])
    stage = Stage(controller, cluster, echo)
    cluster.apply(otel_configmap(receiver), *stage.backend("TRACED", service="web"),
                  k8s.ingress("shop", [k8s.rule(SHOP, ("/api", "Prefix", "web", 80))]),
                  k8s.ingress("untrusted", [k8s.rule(UNTRUSTED, ("/", "Prefix", "web", 80))], annotations={
                      "nginx.ingress.kubernetes.io/enable-opentelemetry": "true",
                      "nginx.ingress.kubernetes.io/opentelemetry-trust-incoming-span": "false",
                      "nginx.ingress.kubernetes.io/opentelemetry-operation-name": "checkout"}),
                  k8s.ingress("quiet", [k8s.rule(QUIET, ("/", "Prefix", "web", 80))], annotations={
                      "nginx.ingress.kubernetes.io/enable-opentelemetry": "false"}))
    stage.expect(SHOP, "/api", "TRACED", timeout=20)
    wait_for(lambda: sent_traceparent(stage, SHOP, "/api") is not None, 30, what="tracing in the applied nginx.conf")
    yield stage
    controller.stop()


def echoed(stage: Stage, host: str, path: str, headers: dict[str, str] | None = None) -> dict[str, str]:
    """The headers the backend received for one request, which must have been answered 200."""
    response = stage.controller.get(path, host, headers=headers or {})
    assert response.status_code == 200, response.text
    return response.json()["headers"]


def sent_traceparent(stage: Stage, host: str, path: str, headers: dict[str, str] | None = None) -> str | None:
    return echoed(stage, host, path, headers).get("traceparent")


def spans_named(receiver: OtlpReceiver, span_ids: set[str]) -> list[ReceivedSpan]:
    """Every span received whose id is one of `span_ids`, once each has arrived (a few seconds at most)."""
    wait_for(lambda: span_ids <= {s.span_id for s in receiver.received()}, 15,
             what=f"{len(span_ids)} spans at the collector")
    time.sleep(0.5)  # a duplicate would come in the same or the next export
    return [s for s in receiver.received() if s.span_id in span_ids]


def test_each_sampled_request_is_one_span_whose_parent_is_the_clients(stage, receiver):
    sent = []
    for i in range(5):
        headers = echoed(stage, SHOP, f"/api/items/{i}?page={i}",
                         {"traceparent": CLIENT_PARENT, "tracestate": "vendor=opaque"})
        version_trace_span = TRACEPARENT.fullmatch(headers["traceparent"])
        assert version_trace_span, headers["traceparent"]
        trace_id, span_id, flags = version_trace_span.groups()
        assert (trace_id, flags) == (CLIENT_TRACE, "01") and span_id != CLIENT_SPAN
        assert headers["tracestate"] == "vendor=opaque"  # trusted: the parent's vendor state goes with it
        sent.append(span_id)
    assert len(set(sent)) == 5
    spans = spans_named(receiver, set(sent))
    assert sorted(s.span_id for s in spans) == sorted(sent)  # exactly one span per request
    for i, span_id in enumerate(sent):
        [span] = [s for s in spans if s.span_id == span_id]
        assert (span.trace_id, span.parent_span_id, span.kind, span.name) == (CLIENT_TRACE, CLIENT_SPAN, "SERVER",
                                                                                "/api")
        assert span.resource["service.name"] == "edge" and span.scope == "pyngress"
        assert 0 < span.start_ns <= span.end_ns and not span.error
        attributes = span.attributes
        assert {k: attributes[k] for k in ("http.request.method", "http.route", "http.response.status_code",
                                           "server.address", "server.port", "url.scheme", "url.path", "url.query",
                                           "client.address", "network.peer.address", "pyngress.ingress")} == {
            "http.request.method": "GET", "http.route": "/api", "http.response.status_code": 200,
            "server.address": SHOP, "server.port": stage.controller.http_port, "url.scheme": "http",
            "url.path": f"/api/items/{i}", "url.query": f"page={i}", "client.address": "127.0.0.1",
            "network.peer.address": "127.0.0.1", "pyngress.ingress": "default/shop"}
        assert attributes["pyngress.upstream.address"] == f"{stage.echo.ips['TRACED']}:{stage.echo.port}"
        assert re.fullmatch(r"[0-9]+\.[0-9]{3}", attributes["pyngress.upstream.response_time"])


def test_a_request_without_a_traceparent_starts_a_trace_the_backend_continues(stage, receiver):
    trace_id, span_id, flags = TRACEPARENT.fullmatch(sent_traceparent(stage, SHOP, "/api/new")).groups()
    assert flags == "01"
    [span] = spans_named(receiver, {span_id})
    assert (span.trace_id, span.parent_span_id) == (trace_id, "")


def test_an_ingress_that_does_not_trust_incoming_spans_starts_a_new_trace(stage, receiver):
    headers = echoed(stage, UNTRUSTED, "/pay", {"traceparent": CLIENT_PARENT, "tracestate": "vendor=opaque"})
    trace_id, span_id, _ = TRACEPARENT.fullmatch(headers["traceparent"]).groups()
    assert trace_id != CLIENT_TRACE and "tracestate" not in headers
    [span] = spans_named(receiver, {span_id})
    assert (span.trace_id, span.parent_span_id, span.name) == (trace_id, "", "checkout")


def test_an_ingress_with_tracing_off_passes_the_clients_headers_and_sends_no_span(stage, receiver):
    before = len(receiver.received())
    headers = echoed(stage, QUIET, "/", {"traceparent": CLIENT_PARENT})
    assert headers["traceparent"] == CLIENT_PARENT
    echoed(stage, SHOP, "/api/after-quiet")  # exported after the quiet one would have been
    wait_for(lambda: len(receiver.received()) > before, 15, what="the next span")
    assert not [s for s in receiver.received()[before:] if s.attributes.get("server.address") == QUIET]


@pytest.mark.parametrize("bad", [CLIENT_PARENT.upper(), f"00-{'0' * 32}-{CLIENT_SPAN}-01",
                                 f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01-extra", f"ff-{CLIENT_TRACE}-{CLIENT_SPAN}-01"])
def test_an_invalid_traceparent_starts_a_new_trace(stage, receiver, bad):
    headers = echoed(stage, SHOP, "/api/bad", {"traceparent": bad, "tracestate": "vendor=opaque"})
    trace_id, span_id, _ = TRACEPARENT.fullmatch(headers["traceparent"]).groups()
    assert trace_id != CLIENT_TRACE and "tracestate" not in headers
    [span] = spans_named(receiver, {span_id})
    assert span.parent_span_id == ""


def test_the_configmaps_operation_name_takes_nginx_variables(stage, receiver):
    reconfigure(stage, receiver, **{"opentelemetry-operation-name": "HTTP $request_method $uri"})
    _, span_id, _ = TRACEPARENT.fullmatch(sent_traceparent(stage, SHOP, "/api/named?x=1")).groups()
    [span] = spans_named(receiver, {span_id})
    assert span.name == "HTTP GET /api/named"
    # An Ingress's own opentelemetry-operation-name still wins.
    _, span_id, _ = TRACEPARENT.fullmatch(sent_traceparent(stage, UNTRUSTED, "/pay")).groups()
    assert [s.name for s in spans_named(receiver, {span_id})] == ["checkout"]


def test_parent_based_sampling_follows_the_clients_decision(stage, receiver):
    reconfigure(stage, receiver, **{"otel-sampler": "AlwaysOff", "otel-sampler-parent-based": "true"})
    sampled = TRACEPARENT.fullmatch(sent_traceparent(stage, SHOP, "/api/p", {"traceparent": CLIENT_PARENT}))
    not_sampled = TRACEPARENT.fullmatch(sent_traceparent(stage, SHOP, "/api/q",
                                                         {"traceparent": CLIENT_PARENT[:-1] + "0"}))
    assert (sampled.group(3), not_sampled.group(3)) == ("01", "00")
    [span] = spans_named(receiver, {sampled.group(2)})
    assert span.parent_span_id == CLIENT_SPAN
    assert not_sampled.group(2) not in {s.span_id for s in receiver.received()}


@pytest.mark.parametrize("sampling", [{"otel-sampler": "TraceIdRatioBased", "otel-sampler-ratio": "0"},
                                      {"otel-sampler": "AlwaysOff"}], ids=["ratio-0", "always-off"])
def test_nothing_sampled_sends_no_span(stage, receiver, sampling):
    reconfigure(stage, receiver, **sampling)
    before = len(receiver.received())
    for i in range(20):
        assert TRACEPARENT.fullmatch(sent_traceparent(stage, SHOP, f"/api/{i}")).group(3) == "00"
    time.sleep(2)  # 20 schedule delays and several takes from nginx
    assert len(receiver.received()) == before


def test_a_dead_collector_changes_nothing_for_clients(stage, receiver):
    dead = receiver.host.rsplit(".", 1)[0] + ".1"  # the same /24 of loopback, where nothing listens
    reconfigure(stage, receiver, **{"otlp-collector-host": dead})

    def lost() -> float:
        return (stage.controller.metric("pyngress_tracing_spans_total", outcome="failed")
                + stage.controller.metric("pyngress_tracing_spans_total", outcome="dropped_queue_full"))
    lost_before, sent = lost(), set()
    for i in range(400):
        response = stage.controller.get(f"/api/{i}", SHOP)
        assert response.status_code == 200 and response.json()["backend"] == "TRACED"
        sent.add(TRACEPARENT.fullmatch(response.json()["headers"]["traceparent"]).group(2))
    # All but what the queue holds and the batch the exporter is trying to send, as their exports time out.
    wait_for(lambda: lost() - lost_before >= 400 - QUEUE_SIZE - 20, 30, interval=1, what="the spans counted as lost")
    assert stage.controller.metric("pyngress_tracing_queued_spans") <= QUEUE_SIZE
    # The exporter gives a batch up once its retries pass the export timeout (about 8 s here).
    wait_for(lambda: stage.controller.metric("pyngress_tracing_spans_total", outcome="failed") > 0, 30, interval=1,
             what="an export counted as failed")
    assert not sent & {s.span_id for s in receiver.received()}


def test_the_default_collector_port_speaks_otlp_over_grpc(stage):
    grpc_receiver = OtlpReceiver(grpc_protocol=True).start()
    try:
        reconfigure(stage, grpc_receiver, **{"otlp-collector-port": "4317"})  # ingress-nginx's default
        _, span_id, _ = TRACEPARENT.fullmatch(sent_traceparent(stage, SHOP, "/api/grpc")).groups()
        [span] = spans_named(grpc_receiver, {span_id})
        assert (span.name, span.attributes["http.route"]) == ("/api", "/api")
    finally:
        grpc_receiver.stop()
