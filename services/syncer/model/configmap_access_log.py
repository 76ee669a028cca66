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
from services.nginxconf.render import size_bytes

from ..annotations.base import InvalidValue
from services.nginxconf.variables import HTTP_PREFIXES, HTTP_VARIABLES, STREAM_VARIABLES, has_stray_dollar, unknown_variables

_PARAMS = re.compile(r"(buffer=[0-9]{1,6}[kKmM]?|flush=[0-9]{1,6}(ms|s|m|h)?|gzip(=[1-9])?)")
MAX_BUFFER = 4 * 1024**2
_PATH = re.compile(r"/[A-Za-z0-9._/-]{0,250}")


def _log_format_of(known: frozenset[str], prefixes: tuple[str, ...], example: str, ours: str) -> Callable[[str], str]:
    """A validator of a log format: printable text whose variables are `known` or start with `prefixes`."""
    def validate(value: str) -> str:
        if not value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
            raise InvalidValue(f"must be one line of text with nginx variables, such as '{example[:40]}...'")
        unknown = unknown_variables(value, known, prefixes)
        if unknown:
            raise InvalidValue(f"names variables nginx does not define here: {', '.join('$' + n for n in unknown)}; "
                               f"use nginx's variables ({ours})")
        if has_stray_dollar(value):
            raise InvalidValue("has a $ that starts no variable name; variables are $name or ${name}")
        return value
    return validate


# log-format-upstream: printable text whose variables nginx (or pyngress's nginx.conf) defines.
log_format = _log_format_of(HTTP_VARIABLES, HTTP_PREFIXES, UPSTREAMINFO_FORMAT,
                            "such as $remote_addr, $status, $request_time) or $proxy_upstream_name, $req_id, "
                            "$namespace, $ingress_name, $service_name, $location_path, $geoip2_city_country_code")
# log-format-stream: the same for the TCP and UDP services' stream servers.
stream_log_format = _log_format_of(STREAM_VARIABLES, (), STREAM_LOG_FORMAT,
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
