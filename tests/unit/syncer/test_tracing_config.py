"""OpenTelemetry's ConfigMap keys and annotations as the model reads them: ingress-nginx's names and defaults, what
nginx.conf hands tracing.lua and the tracer, and what each route carries to the router (no reload)."""
from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

from services.nginxconf.render import render
from services.nginxconf.tracing import TracingSettings, operation_parts
from services.syncer.model.configmap import parse_controller_config

COLLECTOR = {"otlp-collector-host": "otel.example.com"}


def tracing_of(data: dict[str, str]) -> tuple[TracingSettings | None, list[str]]:
    config, problems = parse_controller_config(data, "ConfigMap ingress/c")
    return config.tracing, [p.message for p in problems]


def test_without_tracing_keys_nginx_records_no_spans(cluster):
    cluster.app()
    model = cluster.build()
    assert model.config.tracing is None
    text = render(model.config)
    assert "pyngress_spans" not in text and "pyngress.tracing" not in text


def test_the_defaults_are_ingress_nginxs():
    settings, problems = tracing_of({"enable-opentelemetry": "true", **COLLECTOR})
    assert problems == []
    assert settings == TracingSettings(enabled=True, collector_host="otel.example.com")
    assert (settings.service_name, settings.collector_port, settings.sampler, settings.sampler_ratio,
            settings.sampler_parent_based, settings.trust_incoming_span, settings.max_queue_size,
            settings.schedule_delay_millis, settings.max_export_batch_size) == (
        "nginx", 4317, "AlwaysOff", 0.01, False, True, 2048, 5000, 512)


@pytest.mark.parametrize(("port", "protocol"), [("4317", "grpc"), ("4318", "http/protobuf"), ("55680", "grpc")])
def test_the_collector_port_chooses_the_otlp_protocol(port, protocol):
    settings, _ = tracing_of({**COLLECTOR, "otlp-collector-port": port})
    assert settings is not None and settings.exporter_config()["protocol"] == protocol


def test_a_collector_alone_lets_ingresses_turn_tracing_on():
    settings, _ = tracing_of(COLLECTOR)
    assert settings is not None and not settings.enabled


@pytest.mark.parametrize("ratio", ["0.01", "0.5", "0.25", "0.001", "0.999"])
def test_the_ratio_bound_is_the_opentelemetry_sdks(ratio):
    settings, problems = tracing_of({**COLLECTOR, "otel-sampler": "TraceIdRatioBased", "otel-sampler-ratio": ratio})
    assert problems == [] and settings is not None
    assert settings.lua_config()["sampler"] == "ratio"
    assert settings.lua_config()["ratio_bound"] == f"{TraceIdRatioBased(float(ratio)).bound:016x}"


@pytest.mark.parametrize(("ratio", "sampler"), [("0", "off"), ("1", "on"), ("1.0", "on")])
def test_a_ratio_of_zero_or_one_needs_no_comparison(ratio, sampler):
    settings, _ = tracing_of({**COLLECTOR, "otel-sampler": "TraceIdRatioBased", "otel-sampler-ratio": ratio})
    assert settings is not None and settings.lua_config()["sampler"] == sampler


@pytest.mark.parametrize(("key", "value", "says"), [
    ("otel-sampler", "always_on", "AlwaysOn"),
    ("otel-sampler-ratio", "1.5", "from 0 to 1"),
    ("otlp-collector-port", "0", "whole number"),
    ("otlp-collector-host", "a;b", "DNS name"),
    ("opentelemetry-operation-name", 'a"b', "nginx variables"),
    ("opentelemetry-config", "relative", "absolute path"),
])
def test_a_bad_value_is_reported_and_the_default_applies(key, value, says):
    settings, problems = tracing_of({"enable-opentelemetry": "true", **COLLECTOR, key: value})
    assert len(problems) == 1 and key in problems[0] and says in problems[0], problems
    assert settings == TracingSettings(enabled=True, collector_host="" if key in COLLECTOR else "otel.example.com")


def test_the_jaeger_keys_are_refused_with_the_reason():
    _, problems = tracing_of({"jaeger-collector-host": "jaeger"})
    assert problems == ["key jaeger-collector-host is not supported by pyngress (ingress-nginx removed its Jaeger "
                        "tracer (v1.10): use enable-opentelemetry with otlp-collector-host (Jaeger takes OTLP)); "
                        "ignored"]


def test_an_operation_name_is_text_and_variables():
    assert operation_parts("HTTP $request_method $service_name $uri") == [
        "HTTP ", "request_method", " ", "service_name", " ", "uri", ""]
    assert operation_parts("$host") == ["", "host", ""]


def test_the_rendered_configuration_hands_tracing_to_lua(cluster):
    cluster.app()
    cluster.configmap({"enable-opentelemetry": "true", **COLLECTOR, "otel-sampler": "AlwaysOn"})
    text = render(cluster.build().config)
    assert "lua_shared_dict pyngress_spans" in text
    assert 'require("pyngress.tracing").record()' in text
    assert '["sampler"] = "on"' in text and '["host"] = "otel.example.com"' in text


def route_json(cluster, annotations: dict[str, str]) -> dict:
    cluster.app(annotations=annotations)
    cluster.configmap(COLLECTOR)
    model = cluster.build()
    return model.routes["app.example.com"].to_json()["prefix"][0][1]


def test_an_ingress_turns_tracing_on_with_its_own_trust_and_name(cluster):
    route = route_json(cluster, {"enable-opentelemetry": "true", "opentelemetry-trust-incoming-span": "false",
                                 "opentelemetry-operation-name": "checkout"})
    assert (route["otel_enabled"], route["otel_trust"], route["otel_name"]) == (True, False, "checkout")


def test_an_ingress_turns_tracing_off(cluster):
    route = route_json(cluster, {"enable-opentelemetry": "false"})
    assert route["otel_enabled"] is False and "otel_trust" not in route


def test_trust_and_name_mean_nothing_without_enable_opentelemetry(cluster):
    cluster.app(annotations={"opentelemetry-operation-name": "checkout"})
    model = cluster.build()
    assert "otel_enabled" not in model.routes["app.example.com"].to_json()["prefix"][0][1]
    assert any("opentelemetry-operation-name has no effect without enable-opentelemetry" in w
               for w in cluster.warnings(model))
