import pytest

from services.syncer.model.configmap import parse_controller_config
from services.syncer.model.configmap_directives import DEFAULT_SSL_CIPHERS

# ingress-nginx's defaults (internal/ingress/controller/config/config.go).
DEFAULT_GLOBALS = {
    "client_body_timeout": "60s", "client_header_timeout": "60s", "client_max_body_size": "1m",
    "keepalive_requests": "1000", "keepalive_timeout": "75s", "proxy_connect_timeout": "5s",
    "proxy_read_timeout": "60s", "proxy_send_timeout": "60s", "ssl_ciphers": DEFAULT_SSL_CIPHERS,
    "ssl_protocols": "TLSv1.2 TLSv1.3", "limit_req_status": "503", "limit_conn_status": "503",
    "proxy_buffering": "off", "proxy_buffer_size": "4k", "proxy_buffers": "4 4k", "proxy_request_buffering": "on",
    "proxy_next_upstream": "error timeout", "proxy_next_upstream_timeout": "0s", "proxy_next_upstream_tries": "3",
    "proxy_http_version": "1.1", "client_body_buffer_size": "8k", "client_header_buffer_size": "1k",
    "large_client_header_buffers": "4 8k", "server_tokens": "off", "ignore_invalid_headers": "on",
    "underscores_in_headers": "off", "variables_hash_bucket_size": "256", "variables_hash_max_size": "2048",
    "map_hash_bucket_size": "64", "server_names_hash_bucket_size": "64", "server_names_hash_max_size": "4096",
    "ssl_session_cache": "shared:SSL:10m", "ssl_session_timeout": "10m", "ssl_session_tickets": "off",
    "ssl_ecdh_curve": "auto", "ssl_buffer_size": "4k", "http2_max_concurrent_streams": "128",
    "default_type": "text/html", "proxy_headers_hash_max_size": "512", "proxy_headers_hash_bucket_size": "64",
    "absolute_redirect": "on", "grpc_buffer_size": "4k",
}


def test_without_a_configmap_the_defaults_apply(cluster):
    config = cluster.build().config
    assert config.globals == DEFAULT_GLOBALS
    assert (config.use_forwarded_headers, config.use_proxy_protocol) == (False, False)


def test_configmap_keys_become_nginx_globals(cluster):
    cluster.configmap({
        "proxy-connect-timeout": "10", "proxy-read-timeout": "120s", "proxy-send-timeout": "2m",
        "proxy-body-size": "64M", "keep-alive": "30", "keep-alive-requests": "500", "client-header-timeout": "5",
        "client-body-timeout": "7s", "ssl-protocols": "TLSv1.3", "ssl-ciphers": "ECDHE-RSA-AES128-GCM-SHA256:!aNULL",
        "use-forwarded-headers": "true", "use-proxy-protocol": "true",
    })
    model = cluster.build()
    assert model.problem_lines() == []
    assert model.config.globals == {
        **DEFAULT_GLOBALS,
        "client_body_timeout": "7s", "client_header_timeout": "5s", "client_max_body_size": "64m",
        "keepalive_requests": "500", "keepalive_timeout": "30s", "proxy_connect_timeout": "10s",
        "proxy_read_timeout": "120s", "proxy_send_timeout": "2m", "ssl_ciphers": "ECDHE-RSA-AES128-GCM-SHA256:!aNULL",
        "ssl_protocols": "TLSv1.3", "limit_req_status": "503", "limit_conn_status": "503",
    }
    assert model.config.use_forwarded_headers and model.config.use_proxy_protocol and model.use_proxy_protocol


@pytest.mark.parametrize("key, value", [
    ("proxy-read-timeout", "60s; include /etc/passwd"),
    ("proxy-body-size", "1m\n"),
    ("keep-alive-requests", "0"),
    ("ssl-protocols", "SSLv3 TLSv1.2"),
    ("ssl-protocols", "TLSv1.2;"),
    ("ssl-ciphers", "HIGH; return 200"),
    ("ssl-ciphers", 'HIGH"'),
    ("hsts", "maybe"),
    ("hsts-max-age", "-5"),
    ("annotations-risk-level", "Extreme"),
])
def test_a_bad_value_is_ignored_and_reported_while_the_rest_applies(cluster, key, value):
    cluster.configmap({key: value, "proxy-connect-timeout": "9"})
    model = cluster.build()
    assert model.config.globals == {**DEFAULT_GLOBALS, "proxy_connect_timeout": "9s"}
    [problem] = model.problem_lines()
    assert problem.startswith(f"ConfigMap ingress/ingress-nginx-controller: key {key} value {value!r}: ")
    assert problem.endswith("; the default applies")


def test_unknown_keys_are_ignored_with_a_warning(cluster):
    cluster.configmap({"no-such-key": "true"})
    assert cluster.build().problem_lines() == ["warning: ConfigMap ingress/ingress-nginx-controller: key "
                                               "no-such-key is not supported by pyngress; ignored"]


def test_keys_pyngress_refuses_say_why(cluster):
    cluster.configmap({"reuse-port": "true"})
    [problem] = cluster.build().problem_lines()
    assert problem.startswith("ConfigMap ingress/ingress-nginx-controller: key reuse-port is not supported by "
                              "pyngress (nginx's listening sockets are opened once by the nginx-listeners program")


def test_a_configmap_that_is_named_but_absent_means_defaults(cluster):
    model = cluster.build(configmap="ingress/missing")
    assert model.config.globals == DEFAULT_GLOBALS and model.problem_lines() == []


def test_a_configmap_flag_that_is_not_namespace_slash_name_is_reported(cluster):
    assert cluster.build(configmap="just-a-name").problem_lines() == [
        "--configmap 'just-a-name': must be NAMESPACE/NAME; using the defaults"]


def test_typed_values_for_the_rest_of_the_model():
    config, problems = parse_controller_config({
        "ssl-redirect": "false", "force-ssl-redirect": "true", "hsts": "false", "hsts-max-age": "600",
        "hsts-include-subdomains": "false", "hsts-preload": "true", "annotations-risk-level": "medium",
    }, "ConfigMap x/y")
    assert problems == []
    assert (config.ssl_redirect, config.force_ssl_redirect, config.hsts, config.hsts_max_age,
            config.hsts_include_subdomains, config.hsts_preload, config.annotations_risk_level) == (
        False, True, False, 600, False, True, config.annotations_risk_level.MEDIUM)


@pytest.mark.parametrize("previous, level, says", [
    ({"gzip-level": "5"}, 5, "the previous value '5' keeps applying"),
    ({}, 1, "the default applies"),
    ({"gzip-level": "99"}, 1, "the default applies"),  # a previous value that no longer passes is not kept
])
def test_a_bad_value_keeps_the_previous_good_one(previous, level, says):
    config, problems = parse_controller_config({"use-gzip": "true", "gzip-level": "12"}, "ConfigMap x/y", previous)
    assert config.globals["gzip_comp_level"] == str(level)
    assert [str(p) for p in problems] == [f"ConfigMap x/y: key gzip-level value '12': must be a whole number from 1 "
                                          f"to 9; {says}"]
    assert config.accepted == {"use-gzip": "true", **({"gzip-level": "5"} if level == 5 else {})}


def test_listeners_are_dual_stack_unless_disable_ipv6(cluster):
    assert cluster.build().config.listen_ipv6 is True  # ingress-nginx's default
    cluster.configmap({"disable-ipv6": "true"})
    model = cluster.build()
    assert model.problem_lines() == [] and model.config.listen_ipv6 is False
