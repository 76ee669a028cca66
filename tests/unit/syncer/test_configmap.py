import pytest

from services.syncer.configmap import DEFAULT_SSL_CIPHERS, ControllerConfig, parse_controller_config

DEFAULT_GLOBALS = {
    "client_body_timeout": "60s", "client_header_timeout": "60s", "client_max_body_size": "1m",
    "keepalive_requests": "1000", "keepalive_timeout": "75s", "proxy_connect_timeout": "5s",
    "proxy_read_timeout": "60s", "proxy_send_timeout": "60s", "ssl_ciphers": DEFAULT_SSL_CIPHERS,
    "ssl_protocols": "TLSv1.2 TLSv1.3", "limit_req_status": "503", "limit_conn_status": "503",
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
    cluster.configmap({"enable-brotli": "true"})
    assert cluster.build().problem_lines() == ["warning: ConfigMap ingress/ingress-nginx-controller: key "
                                        "enable-brotli is not supported by pyngress; ignored"]


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
    assert config == ControllerConfig(
        ssl_redirect=False, force_ssl_redirect=True, hsts=False, hsts_max_age=600, hsts_include_subdomains=False,
        hsts_preload=True, annotations_risk_level=config.annotations_risk_level.MEDIUM)
