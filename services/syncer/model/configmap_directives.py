"""Controller ConfigMap keys that are one http-level nginx directive each: the key, the directive, how its value
is checked and written, and ingress-nginx's default (internal/ingress/controller/config/config.go).

Each validator takes the ConfigMap's text and returns the directive's arguments, or raises InvalidValue with
what to write instead; services/nginxconf/render.py then quotes every argument.
"""
from __future__ import annotations

import functools
import re
import ssl
from typing import Callable

from ..annotations.base import InvalidValue
from ..annotations.upstream_behaviour import next_upstream_conditions
from ..annotations.validators import boolean, duration, integer, is_true, size, ssl_ciphers

DEFAULT_SSL_CIPHERS = (
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"
)
_SSL_PROTOCOLS = ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")
_CURVES = re.compile(r"[A-Za-z0-9_-]{1,64}(?::[A-Za-z0-9_-]{1,64}){0,31}")
_MIME_TYPE = re.compile(r"[a-z0-9][a-z0-9.+-]{0,126}/[a-z0-9*][a-z0-9.+*-]{0,126}")
_BUFFERS = re.compile(r"([0-9]{1,4}) +([0-9]{1,13}[kKmM]?)")

BROTLI_MODULE = "/usr/lib/nginx/modules/ngx_http_brotli_filter_module.so"
DEFAULT_BROTLI_TYPES = ("application/xml+rss application/atom+xml application/javascript application/x-javascript "
                        "application/json application/rss+xml application/vnd.ms-fontobject application/x-font-ttf "
                        "application/x-web-app-manifest+json application/xhtml+xml application/xml font/opentype "
                        "image/svg+xml image/x-icon text/css text/javascript text/plain text/x-component")
DEFAULT_GZIP_TYPES = ("application/atom+xml application/javascript application/x-javascript application/json "
                      "application/rss+xml application/vnd.ms-fontobject application/x-font-ttf "
                      "application/x-web-app-manifest+json application/xhtml+xml application/xml font/opentype "
                      "image/svg+xml image/x-icon text/css text/javascript text/plain text/x-component")


def _ssl_protocols(value: str) -> str:
    words = value.split(" ")
    if not all(w in _SSL_PROTOCOLS for w in words):
        raise InvalidValue("must be space-separated protocols from " + " ".join(_SSL_PROTOCOLS))
    return " ".join(dict.fromkeys(words))


def on_off(value: str) -> str:
    """A ConfigMap boolean ("true"/"false") as nginx's on/off."""
    return "on" if is_true(boolean(value)) else "off"


def _switch(value: str) -> str:
    """nginx's own "on"/"off", which ingress-nginx takes for the keys it copies into a directive as they are
    (proxy-buffering, proxy-request-buffering: strings there, not booleans); "true"/"false" read as on/off too."""
    word = value.strip().lower()
    if word in ("on", "off"):
        return word
    try:
        return on_off(word)
    except InvalidValue:
        raise InvalidValue('must be "on" or "off"') from None


def _http_version(value: str) -> str:
    if value not in ("1.0", "1.1"):
        raise InvalidValue('must be "1.1" (the default, needed for keepalive to the backends) or "1.0"')
    return value


def _buffers(value: str) -> str:
    """nginx's "<number> <size>" (large-client-header-buffers "4 8k")."""
    match = _BUFFERS.fullmatch(value.strip())
    if not match or int(match[1]) < 1:
        raise InvalidValue('must be a number of buffers and their size, such as "4 8k"')
    return f"{int(match[1])} {size(64 * 1024**2, 1)(match[2])}"


def _ecdh_curve(value: str) -> str:
    if not _CURVES.fullmatch(value):
        raise InvalidValue('must be "auto" or curve names separated by ":", such as X25519:prime256v1')
    if value == "auto":
        return value
    unknown = [name for name in value.split(":") if not _openssl_knows_group(name)]
    if unknown:
        # nginx would fail to load the configuration for everyone (SSL_CTX_set1_curves_list).
        raise InvalidValue(f"OpenSSL knows no curve named {unknown[0]}; use names such as X25519, prime256v1, "
                           "secp384r1")
    return value


@functools.lru_cache(maxsize=64)
def _openssl_knows_group(name: str) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ecdh_curve(name)
    except (ssl.SSLError, ValueError):
        return False
    return True


def mime_types(value: str) -> str:
    """Space-separated MIME types ("text/css application/json"), as gzip-types takes them."""
    words = value.split()
    if not words or not all(_MIME_TYPE.fullmatch(w) for w in words):
        raise InvalidValue("must be MIME types separated by spaces, such as text/css application/json")
    return " ".join(dict.fromkeys(words))


def seconds(value: str) -> str:
    """A duration nginx reads in whole seconds (no "ms"), such as 10m or 3600."""
    text = duration(value)
    if text.endswith("ms"):
        raise InvalidValue("must be a duration in seconds or more, such as 60, 10m or 1h")
    return text


def _mime_type(value: str) -> str:
    if not _MIME_TYPE.fullmatch(value):
        raise InvalidValue("must be one MIME type, such as text/html")
    return value


def _kib(value: str) -> str:
    """A number of KiB (grpc-buffer-size-kb) as nginx's size."""
    return f"{integer(1, 1 << 20)(value)}k"


def _hash_size(value: str) -> str:
    return integer(32, 1 << 20)(value)


def _hash_bucket_size(value: str) -> str:
    # nginx rounds a bucket up to its cache line (64 bytes) and refuses one above 65536 minus a cache line.
    return integer(32, 65536 - 64)(value)


# ConfigMap key → (nginx directive in NginxConfig.globals, validator, default).
GLOBAL_DIRECTIVES: dict[str, tuple[str, Callable[[str], str], str]] = {
    "proxy-connect-timeout": ("proxy_connect_timeout", duration, "5s"),
    "proxy-read-timeout": ("proxy_read_timeout", duration, "60s"),
    "proxy-send-timeout": ("proxy_send_timeout", duration, "60s"),
    "proxy-body-size": ("client_max_body_size", size(1024**4), "1m"),
    "proxy-buffering": ("proxy_buffering", _switch, "off"),
    "proxy-buffer-size": ("proxy_buffer_size", size(64 * 1024**2, 1024), "4k"),
    "proxy-request-buffering": ("proxy_request_buffering", _switch, "on"),
    "proxy-next-upstream": ("proxy_next_upstream", next_upstream_conditions, "error timeout"),
    "proxy-next-upstream-timeout": ("proxy_next_upstream_timeout", duration, "0s"),
    "proxy-next-upstream-tries": ("proxy_next_upstream_tries", integer(0, 1000), "3"),
    "proxy-http-version": ("proxy_http_version", _http_version, "1.1"),
    "client-body-buffer-size": ("client_body_buffer_size", size(64 * 1024**2, 1), "8k"),
    "client-header-buffer-size": ("client_header_buffer_size", size(64 * 1024**2, 1), "1k"),
    "large-client-header-buffers": ("large_client_header_buffers", _buffers, "4 8k"),
    "keep-alive": ("keepalive_timeout", duration, "75s"),
    "keep-alive-requests": ("keepalive_requests", integer(1, 10**9), "1000"),
    "client-header-timeout": ("client_header_timeout", duration, "60s"),
    "client-body-timeout": ("client_body_timeout", duration, "60s"),
    "server-tokens": ("server_tokens", on_off, "off"),
    "ignore-invalid-headers": ("ignore_invalid_headers", on_off, "on"),
    "enable-underscores-in-headers": ("underscores_in_headers", on_off, "off"),
    "variables-hash-bucket-size": ("variables_hash_bucket_size", _hash_bucket_size, "256"),
    "variables-hash-max-size": ("variables_hash_max_size", _hash_size, "2048"),
    "map-hash-bucket-size": ("map_hash_bucket_size", _hash_bucket_size, "64"),
    "server-name-hash-bucket-size": ("server_names_hash_bucket_size", _hash_bucket_size, "64"),
    "server-name-hash-max-size": ("server_names_hash_max_size", _hash_size, "4096"),
    "ssl-protocols": ("ssl_protocols", _ssl_protocols, "TLSv1.2 TLSv1.3"),
    "ssl-ciphers": ("ssl_ciphers", ssl_ciphers, DEFAULT_SSL_CIPHERS),
    "ssl-session-timeout": ("ssl_session_timeout", seconds, "10m"),
    "ssl-session-tickets": ("ssl_session_tickets", on_off, "off"),
    "ssl-ecdh-curve": ("ssl_ecdh_curve", _ecdh_curve, "auto"),
    "ssl-buffer-size": ("ssl_buffer_size", size(16 * 1024, 512), "4k"),
    "http2-max-concurrent-streams": ("http2_max_concurrent_streams", integer(1, 100_000), "128"),
    "default-type": ("default_type", _mime_type, "text/html"),
    "proxy-headers-hash-max-size": ("proxy_headers_hash_max_size", _hash_size, "512"),
    "proxy-headers-hash-bucket-size": ("proxy_headers_hash_bucket_size", _hash_bucket_size, "64"),
    # relative-redirects "true" is nginx's absolute_redirect off.
    "relative-redirects": ("absolute_redirect", lambda value: "off" if on_off(value) == "on" else "on", "on"),
    "grpc-buffer-size-kb": ("grpc_buffer_size", _kib, "4k"),
    # nginx takes 400-599 here.
    "limit-req-status-code": ("limit_req_status", integer(400, 599), "503"),
    "limit-conn-status-code": ("limit_conn_status", integer(400, 599), "503"),
}
