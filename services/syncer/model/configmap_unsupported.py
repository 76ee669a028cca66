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
    **dict.fromkeys(("nginx-status-ipv4-whitelist", "nginx-status-ipv6-whitelist"),
                    "nginx's status is a Unix socket in the root-only run directory: no address reaches it"),
    "lua-shared-dicts": "pyngress's Lua keeps its own shared dictionaries",
    "enable-serial-reloads": "pyngress reloads at most once per change and never in parallel",
    "forwarded-for-proxy-protocol-header": "it names ingress-nginx's intermediate header for use-forwarded-headers "
                                           "with use-proxy-protocol; pyngress has no such header (the client address "
                                           "is the PROXY header's then), so there is nothing to name",
    "proxy-ssl-location-only": "pyngress always applies the proxy-ssl-* annotations to their own Ingress's paths "
                               "only (as ingress-nginx with proxy-ssl-location-only: \"true\"): all hosts share "
                               "one server block, so there is no server-wide form to turn off",
}
