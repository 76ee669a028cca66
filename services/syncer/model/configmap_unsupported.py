"""ingress-nginx's controller ConfigMap keys that pyngress does not take, each with the reason a ConfigMap that
sets it is told (configmap.py reports it as an error; docs/configmap.md lists them)."""
from __future__ import annotations

UNSUPPORTED: dict[str, str] = {
    "reuse-port": "nginx's listening sockets are opened once by the nginx-listeners program and inherited by each "
                  "new master, so that no connection is refused while nginx restarts; reuseport sockets would die "
                  "with their master",
    "http2-max-field-size": "obsolete in nginx 1.19.7 and later (nginx 1.22 here): use large-client-header-buffers",
    "http2-max-header-size": "obsolete in nginx 1.19.7 and later (nginx 1.22 here): use large-client-header-buffers",
    "http2-max-requests": "obsolete in nginx 1.19.7 and later (nginx 1.22 here): use keep-alive-requests",
    "proxy-busy-buffers-size": "it must fit the buffers each Ingress may change: set it per Ingress with the "
                               "proxy-busy-buffers-size annotation, which is checked against that Ingress's buffers",
    "use-geoip": "MaxMind discontinued the legacy GeoIP databases in 2019 and ingress-nginx no longer reads this key: "
                 "use use-geoip2 with GeoIP2 databases",
    **dict.fromkeys(("jaeger-collector-host", "jaeger-collector-port", "jaeger-endpoint", "jaeger-service-name",
                     "jaeger-propagation-format", "jaeger-sampler-type", "jaeger-sampler-param", "jaeger-sampler-host",
                     "jaeger-sampler-port", "jaeger-trace-context-header-name", "jaeger-debug-header",
                     "jaeger-baggage-header", "jaeger-trace-baggage-header-prefix"),
                    "ingress-nginx removed its Jaeger tracer (v1.10): use enable-opentelemetry with "
                    "otlp-collector-host (Jaeger takes OTLP)"),
    **dict.fromkeys(("proxy-stream-next-upstream", "proxy-stream-next-upstream-timeout",
                     "proxy-stream-next-upstream-tries"),
                    "each TCP or UDP connection is given one endpoint (read per connection, without a reload): "
                    "there is no next one to try"),
    **dict.fromkeys(("enable-syslog", "syslog-host", "syslog-port"),
                    "logs go to stdout and stderr through supervisord; not implemented yet"),
    **dict.fromkeys(("http-access-log-path", "error-log-path"),
                    "not implemented yet: use access-log-path; the error log goes to stderr"),
    **dict.fromkeys(("nginx-status-ipv4-whitelist", "nginx-status-ipv6-whitelist"),
                    "nginx's status is a Unix socket in the root-only run directory: no address reaches it"),
    "bind-address": "not implemented yet: nginx listens on every address, IPv4 and IPv6 (disable-ipv6: IPv4 only)",
    "lua-shared-dicts": "pyngress's Lua keeps its own shared dictionaries",
    "enable-serial-reloads": "pyngress reloads at most once per change and never in parallel",
    **dict.fromkeys(("allow-backend-server-header", "disable-ipv6-dns", "enable-ocsp",
                     "retry-non-idempotent", "enable-multi-accept", "ssl-session-ticket-key", "enable-aio-write",
                     "gzip-disable", "limit-conn-zone-variable", "forwarded-for-proxy-protocol-header",
                     "proxy-add-original-uri-header", "proxy-cookie-path", "proxy-cookie-domain",
                     "proxy-redirect-from", "limit-rate",
                     "limit-rate-after",
                     "proxy-ssl-location-only", "service-upstream", "ssl-reject-handshake", "debug-connections"),
                    "not implemented yet"),
}
