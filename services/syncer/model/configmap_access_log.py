"""The access log's ConfigMap keys, with ingress-nginx's names, defaults and meaning: on by default in its
`upstreaminfo` format (so that existing log parsers keep working), JSON-escaped with log-format-escape-json,
to stdout (supervisord passes nginx's stdout on to the container's).

A custom log-format-upstream may name nginx's own variables and those ingress-nginx users' formats rely
on ($proxy_upstream_name, $proxy_alternative_upstream_name, $req_id, $namespace, $ingress_name,
$service_name, $location_path, and the $geoip2_* of use-geoip2); any other variable is refused with its name,
since nginx would refuse the whole configuration for it.
"""
from __future__ import annotations

import os
import re
from typing import Callable

from services.nginxconf.config import STREAM_LOG_FORMAT, UPSTREAMINFO_FORMAT
from services.nginxconf.geoip2 import VARIABLES as GEOIP2_VARIABLES
from services.nginxconf.render import size_bytes

from ..annotations.base import InvalidValue

_VARIABLE = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")
# nginx's http, upstream, ssl and realip variables (nginx.org's variable index), and ingress-nginx's.
_KNOWN = frozenset("""
    args binary_remote_addr body_bytes_sent bytes_sent connection connection_requests connection_time content_length
    content_type document_root document_uri host hostname https is_args limit_rate msec nginx_version pid pipe
    proxy_protocol_addr proxy_protocol_port proxy_protocol_server_addr proxy_protocol_server_port query_string
    realpath_root remote_addr remote_port remote_user request request_body request_completion request_filename
    request_id request_length request_method request_time request_uri scheme server_addr server_name server_port
    server_protocol status tcpinfo_rtt tcpinfo_rttvar tcpinfo_snd_cwnd tcpinfo_rcv_space time_iso8601 time_local
    uri upstream_addr upstream_bytes_received upstream_bytes_sent upstream_cache_status upstream_connect_time
    upstream_header_time upstream_queue_time upstream_response_length upstream_response_time upstream_status
    ssl_cipher ssl_ciphers ssl_curves ssl_protocol ssl_server_name ssl_session_id ssl_session_reused
    ssl_client_verify ssl_client_s_dn ssl_client_i_dn ssl_client_serial ssl_client_fingerprint ssl_early_data
    realip_remote_addr realip_remote_port proxy_add_x_forwarded_for
    proxy_upstream_name proxy_alternative_upstream_name req_id namespace ingress_name service_name location_path
""".split()) | GEOIP2_VARIABLES  # ingress-nginx's $geoip2_*: empty unless use-geoip2 loads a database defining it
# nginx's stream core, proxy and upstream variables, and $proxy_upstream_name ("tcp-NAMESPACE-SERVICE-PORT").
_STREAM_KNOWN = frozenset("""
    binary_remote_addr bytes_received bytes_sent connection hostname msec nginx_version pid protocol
    proxy_protocol_addr proxy_protocol_port proxy_protocol_server_addr proxy_protocol_server_port remote_addr
    remote_port server_addr server_port session_time status time_iso8601 time_local upstream_addr
    upstream_bytes_received upstream_bytes_sent upstream_connect_time upstream_first_byte_time
    upstream_session_time proxy_upstream_name
""".split())
_KNOWN_PREFIXES = ("arg_", "cookie_", "http_", "sent_http_", "sent_trailer_", "upstream_cookie_", "upstream_http_",
                   "upstream_trailer_")
_PARAMS = re.compile(r"(buffer=[0-9]{1,6}[kKmM]?|flush=[0-9]{1,6}(ms|s|m|h)?|gzip(=[1-9])?)")
MAX_BUFFER = 4 * 1024**2
_PATH = re.compile(r"/[A-Za-z0-9._/-]{0,250}")


def _log_format_of(known: frozenset[str], prefixes: tuple[str, ...], example: str, ours: str) -> Callable[[str], str]:
    """A validator of a log format: printable text whose variables are `known` or start with `prefixes`."""
    def validate(value: str) -> str:
        if not value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise InvalidValue(f"must be one line of text with nginx variables, such as '{example[:40]}...'")
        unknown = sorted({name for braced, plain in _VARIABLE.findall(value) for name in [braced or plain]
                          if name not in known and not name.startswith(prefixes)})
        if unknown:
            raise InvalidValue(f"names variables nginx does not define here: {', '.join('$' + n for n in unknown)}; "
                               f"use nginx's variables ({ours})")
        if "$" in _VARIABLE.sub("", value):
            raise InvalidValue("has a $ that starts no variable name; variables are $name or ${name}")
        return value
    return validate


# log-format-upstream: printable text whose variables nginx (or pyngress's nginx.conf) defines.
log_format = _log_format_of(_KNOWN, _KNOWN_PREFIXES, UPSTREAMINFO_FORMAT,
                            "such as $remote_addr, $status, $request_time) or $proxy_upstream_name, $req_id, "
                            "$namespace, $ingress_name, $service_name, $location_path, $geoip2_city_country_code")
# log-format-stream: the same for the TCP and UDP services' stream servers.
stream_log_format = _log_format_of(_STREAM_KNOWN, (), STREAM_LOG_FORMAT,
                                   "such as $remote_addr, $protocol, $status, $session_time) or $proxy_upstream_name")


def log_params(value: str) -> str:
    """access-log-params: nginx's access_log buffer=, flush= and gzip options, space-separated."""
    words = value.split()
    if not all(_PARAMS.fullmatch(word) for word in words):
        raise InvalidValue("must be access_log options such as 'buffer=16k flush=5s' (buffer=, flush=, gzip[=1-9])")
    buffers = [size_bytes(word[len("buffer="):].lower()) for word in words if word.startswith("buffer=")]
    if any(size > MAX_BUFFER for size in buffers):
        raise InvalidValue(f"buffer= may be at most {MAX_BUFFER // 1024**2}m (each worker holds one)")
    if any(word.startswith("flush=") for word in words) and not (buffers or any(w.startswith("gzip") for w in words)):
        raise InvalidValue("flush= needs buffer= or gzip (nginx refuses it alone)")
    return " ".join(words)


def log_path(value: str) -> str:
    """access-log-path: an absolute file path (/dev/stdout by default)."""
    if not _PATH.fullmatch(value) or "/../" in value + "/":
        raise InvalidValue("must be an absolute path of letters, digits, '.', '_', '-' and '/', such as /dev/stdout")
    # nginx opens it when it loads its configuration: a directory would fail `nginx -t` for everyone.
    if value.endswith("/") or os.path.isdir(value):
        raise InvalidValue("must name a file, not a directory, such as /var/log/nginx/access.log")
    return value


def error_log_path(value: str) -> str:
    """error-log-path: "stderr" (pyngress's default: supervisord passes it on to the container's), or an absolute
    file path. ingress-nginx's default, /var/log/nginx/error.log, is a link to stderr in its image."""
    return value if value == "stderr" else log_path(value)
