"""docs/configmap.md, generated from the controller ConfigMap's tables (services/syncer/model/configmap.py and
configmap_directives.py), so that the table users read is the one the code validates against
(`pyngress docs --configmap`; tests/unit/test_docs.py fails when the committed file is out of date)."""
from __future__ import annotations

import dataclasses
import enum

from services.nginxconf.config import ServerSettings
from services.syncer.annotations.external_auth import GLOBAL_AUTH_KEYS
from services.syncer.model.configmap import FIELDS, SERVER_FIELDS, UNSUPPORTED, ControllerConfig
from services.syncer.annotations import ANNOTATIONS
from services.syncer.model.configmap_directives import GLOBAL_DIRECTIVES, on_off
from services.syncer.model.configmap_server_keys import ANNOTATION_DEFAULTS
from services.syncer.model.configmap_modsecurity import MODSECURITY_MEANING
from services.syncer.model.configmap_tracing import TRACING_DIFFERS, TRACING_MEANING
from services.syncer.model.configmap_geoip2 import GEOIP2_DIFFERS, GEOIP2_MEANING

# What the keys that are not one nginx directive do.
MEANING: dict[str, str] = {
    "ssl-redirect": "Redirect plain HTTP to HTTPS for hosts with TLS.",
    "force-ssl-redirect": "Redirect plain HTTP to HTTPS for every host.",
    "hsts": "Send Strict-Transport-Security on HTTPS.",
    "hsts-max-age": "HSTS max-age, seconds.",
    "hsts-include-subdomains": "HSTS includeSubDomains.",
    "hsts-preload": "HSTS preload.",
    "use-forwarded-headers": "Trust X-Forwarded-* from the peer (a load balancer in front).",
    "use-proxy-protocol": "The public ports expect a PROXY protocol header.",
    "disable-ipv6": "Listen on IPv4 only (by default every listener is also opened on [::], when the machine has IPv6).",
    "annotations-risk-level": "The highest annotation risk level accepted (Low, Medium, High, Critical).",
    "strict-validate-path-type": "Refuse paths that do not fit their pathType.",
    "annotation-value-word-blocklist": "Words refused in any annotation value (comma-separated).",
    "allow-snippet-annotations": "Allow configuration-snippet (with annotations-risk-level Critical).",
    "block-cidrs": "Client networks refused with 403 on every host.",
    "block-user-agents": "User agents refused with 403 (exact, or ~regex).",
    "block-referers": "Referers refused with 403 (exact, or ~regex).",
    "allow-cross-namespace-resources": "Let an Ingress name a Secret in another namespace.",
    "strict-host-ownership": "Refuse an Ingress that names a host another namespace owns (the namespace of the "
                             "host's oldest Ingress); by default its paths are served, and the host's certificate, "
                             "redirects and server-level settings still come only from the owner's namespace.",
    "disable-access-log": "No access log.",
    "access-log-path": "Where the access log goes.",
    "access-log-params": "nginx access_log options (buffer=, flush=, gzip).",
    "log-format-upstream": "The access log format (nginx variables, allow-listed).",
    "log-format-escape-json": "Escape logged values for JSON.",
    "log-format-escape-none": "Do not escape logged values.",
    "enable-access-log-for-default-backend": "Log the requests no Ingress takes.",
    "skip-access-log-urls": "Request URIs not logged (comma-separated).",
    "proxy-buffers-number": "How many proxy buffers (of proxy-buffer-size) a request may use.",
    "ssl-session-cache": "Share TLS sessions between workers.",
    "ssl-session-cache-size": "Size of the shared TLS session cache.",
    "use-gzip": "Compress responses of gzip-types with gzip.",
    "gzip-level": "gzip compression level, 1-9.",
    "gzip-min-length": "Smallest response compressed, bytes.",
    "gzip-types": "MIME types compressed (space-separated).",
    "enable-brotli": "Compress responses of brotli-types with brotli (Debian's brotli filter module).",
    "brotli-level": "brotli compression level, 1-11.",
    "brotli-min-length": "Smallest response compressed with brotli, bytes.",
    "brotli-types": "MIME types compressed with brotli (space-separated).",
    "worker-processes": "nginx worker processes (auto: one per CPU).",
    "max-worker-connections": "Connections per worker (0: 16384).",
    "max-worker-open-files": "Open files per worker (0: nginx's limit).",
    "worker-shutdown-timeout": "How long old workers drain after a reload.",
    "worker-cpu-affinity": "Workers bound to CPUs (auto, or bit masks).",
    "error-log-level": "nginx's error log level.",
    "upstream-keepalive-connections": "Idle connections to the backends kept per worker (0: none).",
    "upstream-keepalive-timeout": "How long an idle backend connection is kept.",
    "upstream-keepalive-requests": "Requests per backend connection.",
    "upstream-keepalive-time": "Longest life of a backend connection.",
    "use-http2": "HTTP/2 on the HTTPS port.",
    "generate-request-id": "Make up an X-Request-ID when the client sent none.",
    "hide-headers": "Backend response headers not passed to clients (comma-separated).",
    "add-headers": "NAMESPACE/NAME of a ConfigMap (in the controller ConfigMap's namespace) of headers sent to every "
                   "client; literal values.",
    "proxy-set-headers": "NAMESPACE/NAME of a ConfigMap (in the controller ConfigMap's namespace) of headers sent to "
                         "every backend; literal values; the headers pyngress sets itself cannot be replaced.",
    "whitelist-source-range": "Client networks allowed on every Ingress without allowlist-source-range of its "
                              "own (comma-separated); others get 403.",
    "denylist-source-range": "Client networks refused with 403 on every Ingress without denylist-source-range of "
                             "its own (comma-separated).",
    "custom-http-errors": "Statuses (comma-separated) answered by --default-backend-service, with X-Code, "
                          "X-Format, X-Original-URI, X-Namespace, X-Ingress-Name, X-Service-Name, X-Service-Port "
                          "and X-Request-ID; the client gets its answer.",
    "http-redirect-code": "Code of the redirect to HTTPS and of from-to-www-redirect (301, 302, 307, 308).",
    "no-tls-redirect-locations": "Path prefixes never redirected to HTTPS (comma-separated).",
    "no-auth-locations": "Ingress paths starting with one of these prefixes (comma-separated) are served without "
                         "authentication (auth-type, auth-url, global-auth-url).",
    "forwarded-for-header": "The header that names the client (use-forwarded-headers, enable-real-ip).",
    "compute-full-forwarded-for": "Send the whole X-Forwarded-For chain plus the peer (with use-forwarded-headers).",
    "enable-real-ip": "Take the client address from forwarded-for-header (without the other X-Forwarded-*).",
    "proxy-real-ip-cidr": "Peers whose forwarded-for-header is trusted (comma-separated networks).",
    "proxy-protocol-header-timeout": "How long a client may take to send its PROXY header (use-proxy-protocol with "
                                     "the passthrough proxy, and TCP services with :PROXY).",
    "global-allowed-response-headers": "Header names (comma-separated) the custom-headers annotation may set.",
    "load-balance": "The load-balance of every Ingress without the annotation (round_robin or ewma).",
    "ssl-dh-param": "NAMESPACE/NAME of a Secret whose dhparam.pem holds the DHE ciphers' DH parameters.",
    "log-format-stream": "The access log format of TCP and UDP services (nginx stream variables, allow-listed).",
    "stream-access-log-path": "Where the TCP and UDP services' access log goes (default: access-log-path).",
    "proxy-stream-timeout": "Idle time after which a TCP or UDP service's connection is closed.",
    "proxy-stream-responses": "Datagrams a UDP client's datagram waits for before its session ends.",
    "relative-redirects": "Redirects nginx itself writes name only the path (nginx's absolute_redirect off).",
    "limit-req-status-code": "Status of a request over its rate limit.",
    "limit-conn-status-code": "Status of a request over its connection limit.",
    "server-tokens": "nginx's `server_tokens`: `true` sends `Server: nginx/<version>`, `false` no Server header at "
                     "all (as ingress-nginx).",
    "main-snippet": "Raw nginx configuration for the main context (whatever allow-snippet-annotations says: the "
                    "ConfigMap is the administrator's). Each snippet must close the blocks it opens; one that "
                    "nginx -t refuses is reported and its previous value keeps applying.",
    "http-snippet": "Raw nginx configuration for the http block (maps, log formats, ...).",
    "server-snippet": "Raw nginx configuration for every server block that serves Ingresses (the default server "
                      "and those of hosts with a server-snippet annotation).",
    "location-snippet": "Raw nginx configuration for every location a request to an Ingress goes through (the "
                        "routing location and each location profile).",
    "stream-snippet": "Raw nginx configuration for the stream block (stream servers).",
    "error-log-path": "Where nginx's error log goes: `stderr` (passed on to the container's by supervisord; "
                      "ingress-nginx's default file is a link to stderr in its image) or a file.",
    "http-access-log-path": "Where the HTTP access log goes, when not access-log-path (the TCP and UDP services' "
                            "log keeps stream-access-log-path, else access-log-path).",
    "enable-syslog": "Send the access log to syslog-host instead of its file, and the http block's error log there "
                     "too (needs syslog-host).",
    "syslog-host": "The syslog server (an IP address or a DNS name nginx resolves when it loads its configuration).",
    "syslog-port": "The syslog server's UDP port.",
    "debug-connections": "Client addresses or networks (comma-separated) whose connections nginx logs at debug level "
                         "(Debian's nginx is built with debugging).",
    "enable-multi-accept": "A worker accepts every waiting connection at once (nginx's `multi_accept`).",
    "enable-aio-write": "Temporary files are written by nginx's thread pool (`aio threads; aio_write on`).",
    "allow-backend-server-header": "The backend's own Server header reaches the client (with server-tokens false, "
                                   "nginx's own answers still carry none).",
    "proxy-add-original-uri-header": "Send X-Original-URI (the request's URI before any rewrite) to every backend.",
    "retry-non-idempotent": "Retry POST, LOCK and PATCH requests on the next endpoint too (`non_idempotent` added "
                            "to proxy-next-upstream and to each Ingress's proxy-next-upstream).",
    "ssl-reject-handshake": "Refuse the TLS handshake for a name no Ingress names (or no SNI), instead of serving "
                            "the default certificate; a rule without a host does not count.",
    "limit-conn-zone-variable": "What limit-rps, limit-rpm and limit-connections count by: the client address, or "
                                "a request header, cookie or argument (`$http_x_api_key`).",
    "bind-address": "IPv4 and IPv6 addresses (comma-separated) nginx listens on instead of every address of their "
                    "family, for HTTP, HTTPS and the TCP and UDP services (with --enable-ssl-passthrough the HTTPS "
                    "port is the passthrough proxy's, on every address); a change restarts nginx, as a reload "
                    "cannot bind them. Each must be an address of the node.",
    "enable-ocsp": "Staple the OCSP response of each certificate served (fetched from the responder its Authority "
                   "Information Access names, through the node's DNS servers; tls.crt must hold the issuer after the "
                   "certificate); a handshake before the first response arrives goes unstapled.",
    "disable-ipv6-dns": "The resolver of auth-url and mirror-target hosts asks for IPv4 addresses only.",
    "gzip-disable": "User agents (space-separated regular expressions, or `msie6`) that get no gzip (with use-gzip).",
    "ssl-session-ticket-key": "Base64 of 48 or 80 random bytes (`openssl rand 80 | openssl enc -A -base64`): the "
                              "key of TLS session tickets (with ssl-session-tickets), the same in every worker and "
                              "across reloads and replicas; by default nginx makes a random one at each load.",
    "limit-rate": "The limit-rate of every Ingress without the annotation (kilobytes per second per request; 0: none; "
                  "with proxy-buffering on, as in ingress-nginx).",
    "limit-rate-after": "The limit-rate-after of every Ingress without the annotation (kilobytes).",
    "proxy-cookie-path": "The proxy-cookie-path of every Ingress without the annotation.",
    "proxy-cookie-domain": "The proxy-cookie-domain of every Ingress without the annotation.",
    "proxy-redirect-from": "The proxy-redirect-from of every Ingress without the annotation.",
    "proxy-redirect-to": "The proxy-redirect-to of every Ingress without the annotation.",
    "service-upstream": "The service-upstream of every Ingress without the annotation.",
    "use-port-in-redirects": "The use-port-in-redirects of every Ingress without the annotation: the redirect to "
                             "HTTPS names the HTTPS port (by default it names none, whatever the port).",
    **TRACING_MEANING,
    **MODSECURITY_MEANING,
    **GEOIP2_MEANING,
}
# How the keys whose behaviour differs from ingress-nginx's differ, and what to do about it if anything (one sentence
# each; docs/configmap.md shows it, `pyngress lint` notes it for each key a ConfigMap sets). The keys an annotation
# of the same name sets the default of share its text.
DIFFERS: dict[str, str] = {
    "bind-address": "A value with one item that is not an IP address (a network, a name) is refused whole and the "
                    "previous value keeps applying (ingress-nginx drops the bad items and listens on the others); a "
                    "change restarts nginx.",
    "block-cidrs": "Answered 403 before routing, on every location (ingress-nginx's http-level deny is dropped in a "
                   "location with allow or deny rules of its own, such as an Ingress with an allow-list).",
    **dict.fromkeys(("block-user-agents", "block-referers"),
                    "A ~regex entry PCRE refuses is reported with PCRE's message and the key keeps its previous value "
                    "(ingress-nginx wrote it into nginx.conf, where nginx -t failed for every Ingress)."),
    "access-log-params": "Defaults to buffer=64k flush=1s (ingress-nginx: none): a line reaches the log within a "
                         "second at far less CPU per request; set it to \"\" for a write per request.",
    **dict.fromkeys(("add-headers", "proxy-set-headers"),
                    "Each nginx variable in a value must be one nginx defines, and the headers pyngress sets for every "
                    "backend (Host, X-Forwarded-*, X-Request-ID, ...) cannot be replaced."),
    "annotation-value-word-blocklist": "Empty items are dropped (ingress-nginx lets an empty word block every "
                                       "value).",
    "global-auth-url": "A bad global-auth-* value makes the Ingresses it covers answer 503 until it is fixed, rather "
                       "than serving them without authentication.",
    **{key: ANNOTATIONS[key].differs or "" for key in ("enable-modsecurity", "modsecurity-snippet",
                                                        "enable-opentelemetry")},
    **TRACING_DIFFERS,
    **GEOIP2_DIFFERS,
}
# Keys whose value is pushed to nginx's Lua with the routes: a change never reloads nginx.
PUSHED = frozenset({"ssl-redirect", "force-ssl-redirect", "hsts", "hsts-max-age", "hsts-include-subdomains",
                    "hsts-preload", "http-redirect-code", "no-tls-redirect-locations"})
# Keys that decide which Ingresses and settings are accepted: nginx reloads only if that changes a profile.
POLICY = frozenset({"annotations-risk-level", "strict-validate-path-type", "annotation-value-word-blocklist",
                    "allow-snippet-annotations", "allow-cross-namespace-resources",
                    "strict-host-ownership"})


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# Defaults whose ConfigMap form is not the directive's argument.
_CONFIGMAP_FORM = {"relative-redirects": "false", "grpc-buffer-size-kb": "4"}


def _default(key: str) -> str:
    if key in _CONFIGMAP_FORM:
        return _CONFIGMAP_FORM[key]
    if key in GLOBAL_DIRECTIVES:
        _, validate, default = GLOBAL_DIRECTIVES[key]
        return {"on": "true", "off": "false"}[default] if validate is on_off else default
    if key in ANNOTATION_DEFAULTS:
        return ANNOTATIONS[key].default or ""
    target, source = (SERVER_FIELDS[key][0], ServerSettings) if key in SERVER_FIELDS else (FIELDS[key][0], ControllerConfig)
    value = {f.name: f for f in dataclasses.fields(source)}[target].default
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return ",".join(value)
    if isinstance(value, enum.Enum):
        return value.name.capitalize()
    return "" if value is None or value is dataclasses.MISSING else str(value)


def _applied(key: str) -> str:
    if key in PUSHED or key in ANNOTATION_DEFAULTS and not ANNOTATIONS[key].reloads:
        return "Lua tables (no reload)"
    if key in POLICY or key in ANNOTATION_DEFAULTS:
        return "model (reloads only if a profile changes)"
    return "nginx.conf (one reload)"


def configmap_keys() -> set[str]:
    """Every controller ConfigMap key pyngress takes (the global auth keys apart)."""
    return {*GLOBAL_DIRECTIVES, *FIELDS, *SERVER_FIELDS, *ANNOTATION_DEFAULTS}


def configmap_markdown() -> str:
    keys = sorted(configmap_keys())
    lines = [
        "# Controller ConfigMap keys",
        "",
        "Generated by `pyngress docs --configmap` from the ConfigMap's tables; do not edit. Names and defaults are "
        "ingress-nginx's. A bad value is reported (`pyngress status`, the syncer's log) with the key, and the value "
        "it had before keeps applying (its default when it had none); the other keys still apply. *Applied* says "
        "whether a change reloads nginx (after `nginx -t`). *Differs from ingress-nginx* is what behaves otherwise there, "
        "and what to do about it; `pyngress lint --configmap` notes it for each key the ConfigMap sets.",
        "",
        "| Key | Meaning | Default | Applied | Differs from ingress-nginx |",
        "|---|---|---|---|---|",
    ]
    for key in keys:
        meaning = MEANING.get(key) or f"nginx's `{GLOBAL_DIRECTIVES[key][0]}`."
        default = _default(key)
        lines.append(f"| `{key}` | {_cell(meaning)} | {f'`{_cell(default)}`' if default else '(none)'} | "
                     f"{_applied(key)} | {_cell(DIFFERS.get(key, ''))} |")
    lines += ["", "The global external authentication keys (" + ", ".join(f"`{k}`" for k in sorted(GLOBAL_AUTH_KEYS))
              + ") take the values of the auth-* annotations of the same names (docs/annotations.md); a change "
              "reloads nginx. " + DIFFERS["global-auth-url"], "",
              "## ingress-nginx keys pyngress does not take", "",
              "Each is reported as an error naming the key when a ConfigMap sets it; nothing else changes.", "",
              "| Key | Why |", "|---|---|"]
    lines += [f"| `{key}` | {_cell(reason)} |" for key, reason in sorted(UNSUPPORTED.items())]
    return "\n".join(lines) + "\n"
