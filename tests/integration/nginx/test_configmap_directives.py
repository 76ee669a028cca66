"""Each controller ConfigMap key: an accepted value becomes its nginx directive (in the rendered nginx.conf,
which `nginx -t` accepts), a refused one is reported with the key and what to write instead."""
from __future__ import annotations

from typing import Iterator

import pytest

from services.nginxconf.render import render
from services.syncer.model.configmap import FIELDS, SERVER_FIELDS
from services.syncer.model.configmap_directives import GLOBAL_DIRECTIVES
from services.syncer.model.configmap_server_keys import ANNOTATION_DEFAULTS
from tests.support.model_cluster import Cluster
from tests.support.nginx_check import NginxCheck, nginx_check_in_tmp

# key → (accepted value, what nginx.conf then holds, refused value, what the message says)
CASES: dict[str, tuple[str, str, str, str]] = {
    "proxy-connect-timeout": ("3", 'proxy_connect_timeout "3s";', "3x", "must be a duration"),
    "proxy-read-timeout": ("2m", 'proxy_read_timeout "2m";', "-1", "must be a duration"),
    "proxy-send-timeout": ("90", 'proxy_send_timeout "90s";', "1d", "must be a duration"),
    "proxy-body-size": ("8m", 'client_max_body_size "8m";', "8t", "must be a size"),
    "proxy-buffering": ("on", 'proxy_buffering "on";', "yes", 'must be "on" or "off"'),
    "proxy-buffer-size": ("16k", 'proxy_buffer_size "16k";', "16", "must be a size"),
    "proxy-buffers-number": ("8", 'proxy_buffers "8" "4k";', "0", "must be a whole number from 1 to 1024"),
    "proxy-request-buffering": ("off", 'proxy_request_buffering "off";', "no", 'must be "on" or "off"'),
    "proxy-next-upstream": ("error http_502", 'proxy_next_upstream "error" "http_502";', "error;", "must be"),
    "proxy-next-upstream-timeout": ("10", 'proxy_next_upstream_timeout "10s";', "ten", "must be a duration"),
    "proxy-next-upstream-tries": ("5", 'proxy_next_upstream_tries "5";', "-5", "must be a whole number"),
    "proxy-http-version": ("1.0", 'proxy_http_version "1.0";', "2", 'must be "1.1"'),
    "client-body-buffer-size": ("64k", 'client_body_buffer_size "64k";', "64q", "must be a size"),
    "client-header-buffer-size": ("2k", 'client_header_buffer_size "2k";', "0", "must be a size"),
    "large-client-header-buffers": ("8 16k", 'large_client_header_buffers "8" "16k";', "8", "number of buffers"),
    "keep-alive": ("30", 'keepalive_timeout "30s";', "forever", "must be a duration"),
    "keep-alive-requests": ("50", 'keepalive_requests "50";', "0", "must be a whole number"),
    "client-header-timeout": ("5", 'client_header_timeout "5s";', "x", "must be a duration"),
    "client-body-timeout": ("5", 'client_body_timeout "5s";', "x", "must be a duration"),
    "server-tokens": ("true", 'server_tokens "on";', "maybe", 'must be "true" or "false"'),
    "ignore-invalid-headers": ("false", 'ignore_invalid_headers "off";', "x", 'must be "true" or "false"'),
    "enable-underscores-in-headers": ("true", 'underscores_in_headers "on";', "x", 'must be "true" or "false"'),
    "variables-hash-bucket-size": ("512", 'variables_hash_bucket_size "512";', "8", "must be a whole number"),
    "variables-hash-max-size": ("4096", 'variables_hash_max_size "4096";', "x", "must be a whole number"),
    "map-hash-bucket-size": ("128", 'map_hash_bucket_size "128";', "x", "must be a whole number"),
    "server-name-hash-bucket-size": ("128", 'server_names_hash_bucket_size "128";', "x", "must be a whole number"),
    "server-name-hash-max-size": ("8192", 'server_names_hash_max_size "8192";', "x", "must be a whole number"),
    "ssl-protocols": ("TLSv1.3", 'ssl_protocols "TLSv1.3";', "SSLv3", "must be space-separated protocols"),
    "ssl-ciphers": ("ECDHE-RSA-AES128-GCM-SHA256", 'ssl_ciphers "ECDHE-RSA-AES128-GCM-SHA256";', "!ALL",
                    "selects no cipher"),
    "ssl-session-timeout": ("1h", 'ssl_session_timeout "1h";', "500ms", "in seconds or more"),
    "ssl-session-tickets": ("true", 'ssl_session_tickets "on";', "x", 'must be "true" or "false"'),
    "ssl-session-cache": ("false", 'ssl_session_cache "off";', "x", 'must be "true" or "false"'),
    "ssl-session-cache-size": ("20m", 'ssl_session_cache "shared:SSL:20m";', "1k", "must be a size"),
    "ssl-ecdh-curve": ("X25519:prime256v1", 'ssl_ecdh_curve "X25519:prime256v1";', "prime256v1:9999",
                       "OpenSSL knows no curve named 9999"),
    "ssl-buffer-size": ("8k", 'ssl_buffer_size "8k";', "1m", "must be a size"),
    "http2-max-concurrent-streams": ("64", 'http2_max_concurrent_streams "64";', "0", "must be a whole number"),
    "default-type": ("application/octet-stream", 'default_type "application/octet-stream";', "html",
                     "one MIME type"),
    "proxy-headers-hash-max-size": ("1024", 'proxy_headers_hash_max_size "1024";', "x", "must be a whole number"),
    "proxy-headers-hash-bucket-size": ("128", 'proxy_headers_hash_bucket_size "128";', "x", "must be a whole number"),
    "relative-redirects": ("true", 'absolute_redirect "off";', "x", 'must be "true" or "false"'),
    "grpc-buffer-size-kb": ("16", 'grpc_buffer_size "16k";', "0", "must be a whole number"),
    "limit-req-status-code": ("429", 'limit_req_status "429";', "200", "must be a whole number from 400 to 599"),
    "limit-conn-status-code": ("429", 'limit_conn_status "429";', "600", "must be a whole number from 400 to 599"),
    "use-gzip": ("true", 'gzip "on";', "x", 'must be "true" or "false"'),
    "gzip-level": ("6", "", "10", "must be a whole number from 1 to 9"),
    "gzip-min-length": ("100", "", "-1", "must be a whole number"),
    "gzip-types": ("text/css", "", "text/css;", "MIME types"),
    "enable-brotli": ("true", "load_module /usr/lib/nginx/modules/ngx_http_brotli_filter_module.so;", "x",
                      'must be "true" or "false"'),
    "brotli-level": ("6", "", "12", "must be a whole number from 1 to 11"),
    "brotli-min-length": ("100", "", "-1", "must be a whole number"),
    "brotli-types": ("text/css", "", "text/css;", "MIME types"),
    # The databases are found by the syncer (tests/e2e/ingress/test_geoip2.py); none here, so no module either.
    "use-geoip2": ("true", "", "x", 'must be "true" or "false"'),
    "geoip2-autoreload-in-minutes": ("5", "", "-1", "must be a whole number from 0 to 10080"),
    "worker-processes": ("2", 'worker_processes "2";', "0", "must be a whole number from 1 to 1024"),
    "max-worker-connections": ("4096", "worker_connections 4096;", "-1", "must be a whole number"),
    "max-worker-open-files": ("65536", 'worker_rlimit_nofile "65536";', "x", "must be a whole number"),
    "worker-shutdown-timeout": ("30s", 'worker_shutdown_timeout "30s";', "soon", "must be a duration"),
    "worker-cpu-affinity": ("auto", 'worker_cpu_affinity "auto";', "0x3", "CPU bit mask"),
    "error-log-level": ("warn", 'error_log "stderr" "warn";', "verbose", "must be one of"),
    "upstream-keepalive-connections": ("64", "keepalive 64;", "-1", "must be a whole number"),
    "upstream-keepalive-timeout": ("30", 'keepalive_timeout "30s";', "x", "must be a duration"),
    "upstream-keepalive-requests": ("100", "keepalive_requests 100;", "0", "must be a whole number"),
    "upstream-keepalive-time": ("30m", 'keepalive_time "30m";', "x", "must be a duration"),
    "use-http2": ("false", "ssl default_server;", "x", 'must be "true" or "false"'),
    "generate-request-id": ("false", "", "x", 'must be "true" or "false"'),
    "hide-headers": ("X-Powered-By,Server", 'proxy_hide_header "X-Powered-By";', "X Bad", "header names"),
    "skip-access-log-urls": ("/healthz", 'if=$pyngress_loggable', "healthz", "URL paths"),
    "custom-http-errors": ("404,503", "error_page 503 = @pyngress_error_503;", "404,200",
                           "must be a whole number from 400 to 599"),
    "forwarded-for-header": ("X-Client", 'real_ip_header "X-Client";', "X Client", "header name"),
    "compute-full-forwarded-for": ("true", '"$http_x_forwarded_for, $realip_remote_addr"', "x",
                                   'must be "true" or "false"'),
    "enable-real-ip": ("true", "real_ip_recursive on;", "x", 'must be "true" or "false"'),
    "log-format-stream": ("$remote_addr $protocol $proxy_upstream_name",
                          "log_format log_stream \"$remote_addr $protocol $proxy_upstream_name\";", "$request_uri",
                          "names variables nginx does not define here: $request_uri"),
    "stream-access-log-path": ("/tmp/pyngress-stream.log", 'access_log "/tmp/pyngress-stream.log" log_stream;', "x",
                               "must be an absolute path"),
    "proxy-stream-timeout": ("30s", 'proxy_timeout "30s";', "30x", "duration"),
    "proxy-stream-responses": ("2", "proxy_responses 2;", "-1", "0"),
    # With a TCP service that reads the PROXY protocol (the passthrough proxy's use: tests/integration/proxy).
    "proxy-protocol-header-timeout": ("3s", 'proxy_protocol_timeout "3s";', "3x", "duration"),
    "proxy-real-ip-cidr": ("10.0.0.0/8,192.168.0.0/16", 'set_real_ip_from "192.168.0.0/16";', "10.0.0.0/33",
                           "10.0.0.0/33"),
    "error-log-path": ("/tmp/pyngress-error.log", 'error_log "/tmp/pyngress-error.log" "notice";', "logs",
                       "must be an absolute path"),
    "http-access-log-path": ("/tmp/pyngress-http.log", 'access_log "/tmp/pyngress-http.log" upstreaminfo', "x",
                             "must be an absolute path"),
    "enable-syslog": ("true", 'error_log "syslog:server=127.0.0.1:514" "notice";', "x", 'must be "true" or "false"'),
    "syslog-host": ("::1", 'access_log "syslog:server=[::1]:514" upstreaminfo;', "bad host!", "IP address or a DNS"),
    "syslog-port": ("5514", 'access_log "syslog:server=127.0.0.1:5514" upstreaminfo;', "0",
                    "must be a whole number from 1 to 65535"),
    "debug-connections": ("127.0.0.1,10.0.0.0/8", 'debug_connection "10.0.0.0/8";', "10.0.0.0/33",
                          "not an IP address or CIDR"),
    "enable-multi-accept": ("false", "multi_accept off;", "x", 'must be "true" or "false"'),
    "enable-aio-write": ("true", "aio_write on;", "x", 'must be "true" or "false"'),
    "allow-backend-server-header": ("true", "proxy_pass_header Server;", "x", 'must be "true" or "false"'),
    "proxy-add-original-uri-header": ("true", "proxy_set_header X-Original-URI $request_uri;", "x",
                                      'must be "true" or "false"'),
    "retry-non-idempotent": ("true", 'proxy_next_upstream "error" "timeout" "non_idempotent";', "x",
                             'must be "true" or "false"'),
    "ssl-reject-handshake": ("true", "ssl_reject_handshake = true,", "x", 'must be "true" or "false"'),
    "gzip-disable": ("msie6 Opera.*Mini", 'gzip_disable "msie6" "Opera.*Mini";', "(", "not a valid regular expression"),
    "enable-ocsp": ("true", "lua_shared_dict pyngress_ocsp 4m;", "x", 'must be "true" or "false"'),
    "bind-address": ("127.0.0.1,::1", "listen 127.0.0.1:9000 proxy_protocol;", "10.0.0.0/8", "not networks"),
    # ModSecurity (tests/integration/nginx/test_modsecurity.py: what it does to requests).
    "enable-modsecurity": ("true", "load_module /usr/lib/nginx/modules/ngx_http_modsecurity_module.so;", "x",
                           'must be "true" or "false"'),
    "enable-owasp-modsecurity-crs": ("true", "Include /usr/share/modsecurity-crs/rules/*.conf", "x",
                                     'must be "true" or "false"'),
    "modsecurity-snippet": ("SecRuleEngine On", "SecRuleEngine DetectionOnly\\nSecRuleEngine On", "Include /etc/passwd",
                            "a snippet may include only ingress-nginx's rule files"),
    # Defaults of the annotations of the same names: the Ingress's location profile carries them.
    "limit-rate": ("100", 'limit_rate "100k";', "x", "must be a whole number"),
    "limit-rate-after": ("50", 'limit_rate_after "50k";', "-1", "must be a whole number"),
    "proxy-cookie-path": ("/ /app", 'proxy_cookie_path "/" "/app";', "/a;b", "the path to change"),
    "proxy-cookie-domain": ("backend.local example.com", 'proxy_cookie_domain "backend.local" "example.com";', "a b;",
                            "the domain to change"),
    "proxy-redirect-from": ("http://backend/", 'proxy_redirect "http://backend/" "/";', "a b", "must be a URL"),
    "proxy-redirect-to": ("/app/", 'proxy_redirect "http://backend/" "/app/";', "$x", "must be a URL"),
    # (and the redirect to HTTPS names the port: tests/e2e/ingress/test_forwarded_headers.py)
    "use-port-in-redirects": ("true", 'port_in_redirect "on";', "yes", "must be"),
}
# Keys tested elsewhere (typed model values, access log, block lists, policies, HSTS and redirects, the
# ConfigMaps of headers).
ELSEWHERE = {"add-headers", "proxy-set-headers", "whitelist-source-range", "denylist-source-range", "ssl-redirect",
             "force-ssl-redirect", "hsts", "hsts-max-age", "hsts-include-subdomains", "hsts-preload",
             "use-forwarded-headers", "use-proxy-protocol", "annotations-risk-level", "strict-validate-path-type",
             "strict-host-ownership", "annotation-value-word-blocklist", "allow-snippet-annotations", "block-cidrs",
             "block-user-agents", "block-referers", "allow-cross-namespace-resources", "disable-access-log",
             "access-log-path", "access-log-params", "log-format-upstream", "log-format-escape-json",
             "log-format-escape-none", "enable-access-log-for-default-backend", "ssl-dh-param", "http-redirect-code",
             "load-balance", "global-allowed-response-headers", "no-tls-redirect-locations",
             # tests/e2e/ingress/test_no_auth_locations.py
             "no-auth-locations",
             # tests/e2e/ingress/test_configmap_snippets.py and test_ipv6_listeners.py
             "main-snippet", "http-snippet", "server-snippet", "location-snippet", "stream-snippet", "disable-ipv6",
             # tests/e2e/ingress/test_configmap_server_keys.py; disable-ipv6-dns: test_resolver_asks_for_ipv4_only
             "limit-conn-zone-variable", "ssl-session-ticket-key", "service-upstream", "disable-ipv6-dns",
             # tests/e2e/observability/test_tracing.py and tests/unit/syncer/test_configmap_tracing.py
             "enable-opentelemetry", "opentelemetry-trust-incoming-span", "opentelemetry-operation-name",
             "otel-service-name", "otlp-collector-host", "otlp-collector-port", "otel-max-queuesize",
             "otel-schedule-delay-millis", "otel-max-export-batch-size", "otel-sampler", "otel-sampler-ratio",
             "otel-sampler-parent-based", "opentelemetry-config"}
# What a key needs beside it to show in nginx.conf.
COMPANIONS = {"brotli-level": {"enable-brotli": "true"}, "brotli-min-length": {"enable-brotli": "true"},
              "brotli-types": {"enable-brotli": "true"}, "gzip-level": {"use-gzip": "true"}, "gzip-min-length": {"use-gzip": "true"},
              "gzip-types": {"use-gzip": "true"}, "compute-full-forwarded-for": {"use-forwarded-headers": "true"},
              "forwarded-for-header": {"enable-real-ip": "true"}, "proxy-real-ip-cidr": {"enable-real-ip": "true"},
              "enable-syslog": {"syslog-host": "127.0.0.1"}, "syslog-host": {"enable-syslog": "true"},
              "syslog-port": {"enable-syslog": "true", "syslog-host": "127.0.0.1"}, "gzip-disable": {"use-gzip": "true"},
              "proxy-redirect-from": {"proxy-redirect-to": "/"}, "enable-owasp-modsecurity-crs": {"enable-modsecurity": "true"},
              "modsecurity-snippet": {"enable-modsecurity": "true"}, "proxy-redirect-to": {"proxy-redirect-from": "http://backend/"}}
# And what a companion makes nginx.conf hold for the rest of its group.
GROUP_LINES = {"brotli-level": 'brotli_comp_level "6";', "brotli-min-length": 'brotli_min_length "100";',
               "brotli-types": 'brotli_types "text/css";', "gzip-level": 'gzip_comp_level "6";', "gzip-min-length": 'gzip_min_length "100";',
               "gzip-types": 'gzip_types "text/css";'}


def test_every_key_has_a_case():
    assert set(CASES) | ELSEWHERE == set(GLOBAL_DIRECTIVES) | set(FIELDS) | set(SERVER_FIELDS) | set(ANNOTATION_DEFAULTS)


@pytest.fixture(scope="module")
def nginx_check() -> Iterator[NginxCheck]:
    yield from nginx_check_in_tmp()


def rendered(nginx_check: NginxCheck, data: dict[str, str]) -> tuple[str, list[str]]:
    cluster = Cluster()
    cluster.ingress_class()
    cluster.app("web", host="keys.example.com")
    cluster.configmap(data)
    # A TCP and a UDP service, for the stream keys.
    for name, entry in (("tcp", "default/web:80:PROXY"), ("udp", "default/web:80")):
        cluster.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "ingress"},
                     "data": {"9000": entry}})
    paths = nginx_check.paths
    model = cluster.build(configmap="ingress/ingress-nginx-controller", state_dir=str(paths.state_dir),
                          run_dir=str(paths.run_dir), tcp_services_configmap="ingress/tcp",
                          udp_services_configmap="ingress/udp")
    return render(model.config), model.problem_lines()


@pytest.mark.parametrize("key", sorted(CASES))
def test_an_accepted_value_is_its_directive_and_nginx_takes_it(nginx_check, key):
    good, expected, _, _ = CASES[key]
    text, problems = rendered(nginx_check, {**COMPANIONS.get(key, {}), key: good})
    assert problems == []
    assert (GROUP_LINES.get(key) or expected) in text
    assert nginx_check.error(text) is None


@pytest.mark.parametrize("key", sorted(CASES))
def test_a_refused_value_names_the_key_and_what_to_write(nginx_check, key):
    _, _, bad, says = CASES[key]
    text, problems = rendered(nginx_check, {key: bad})
    [problem] = problems
    assert problem.startswith(f"ConfigMap ingress/ingress-nginx-controller: key {key} value {bad!r}: ")
    assert says in problem and problem.endswith("; the default applies")
    assert nginx_check.error(text) is None


def test_server_name_hashes_grow_for_long_snippet_hosts(nginx_check):
    # A host with a server-snippet has a server block of its own: nginx must fit its name in the hash.
    long_host = ".".join(["a" * 60] * 3) + ".example.com"
    cluster = Cluster()
    cluster.ingress_class()
    cluster.configmap({"allow-snippet-annotations": "true", "annotations-risk-level": "Critical"})
    cluster.app("long", host=long_host, annotations={"server-snippet": "add_header X-Long yes;"})
    paths = nginx_check.paths
    model = cluster.build(state_dir=str(paths.state_dir), run_dir=str(paths.run_dir))
    text = render(model.config)
    assert model.problem_lines() == [] and f'server_name "{long_host}";' in text
    assert 'server_names_hash_bucket_size "256";' in text
    assert nginx_check.error(text) is None


def test_resolver_asks_for_ipv4_only(nginx_check):
    # The resolver is written only where nginx resolves a name per request: auth-url (and mirror-target) hosts.
    cluster = Cluster()
    cluster.ingress_class()
    cluster.configmap({"disable-ipv6-dns": "true"})
    cluster.app("authed", host="authed.example.com", annotations={"auth-url": "http://auth.example.com/check"})
    paths = nginx_check.paths
    model = cluster.build(state_dir=str(paths.state_dir), run_dir=str(paths.run_dir))
    text = render(model.config)
    assert model.problem_lines() == [] and " valid=30s ipv6=off;" in text
    assert nginx_check.error(text) is None
