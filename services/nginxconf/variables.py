"""The nginx variables an administrator's text may name (log formats, the headers of add-headers and
proxy-set-headers): nginx's own http, upstream, ssl and realip variables (nginx.org's variable index), those
ingress-nginx users' formats rely on, and the $geoip2_* of use-geoip2. Any other name is refused with the
name, since nginx would refuse the whole configuration for a variable it does not define."""
from __future__ import annotations

import re

from .geoip2 import VARIABLES as GEOIP2_VARIABLES

VARIABLE = re.compile(r"\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))")
HTTP_VARIABLES = frozenset("""
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
# Families: a request's argument, cookie or header, a response's header or trailer, an upstream's.
HTTP_PREFIXES = ("arg_", "cookie_", "http_", "sent_http_", "sent_trailer_", "upstream_cookie_", "upstream_http_",
                 "upstream_trailer_")
# nginx's stream core, proxy and upstream variables, and $proxy_upstream_name ("tcp-NAMESPACE-SERVICE-PORT").
STREAM_VARIABLES = frozenset("""
    binary_remote_addr bytes_received bytes_sent connection hostname msec nginx_version pid protocol
    proxy_protocol_addr proxy_protocol_port proxy_protocol_server_addr proxy_protocol_server_port remote_addr
    remote_port server_addr server_port session_time status time_iso8601 time_local upstream_addr
    upstream_bytes_received upstream_bytes_sent upstream_connect_time upstream_first_byte_time
    upstream_session_time proxy_upstream_name
""".split())


def unknown_variables(text: str, known: frozenset[str] = HTTP_VARIABLES,
                      prefixes: tuple[str, ...] = HTTP_PREFIXES) -> list[str]:
    """The names of the variables `text` uses that are neither `known` nor of a family in `prefixes`, sorted."""
    return sorted({name for braced, plain in VARIABLE.findall(text) for name in [braced or plain]
                   if name not in known and not name.startswith(prefixes)})


def has_stray_dollar(text: str) -> bool:
    """Whether `text` has a `$` that starts no variable name ($name or ${name})."""
    return "$" in VARIABLE.sub("", text)
