"""Controller ConfigMap keys beyond one http-level directive: nginx's events and logging, TLS session tickets,
gzip's exceptions, the rate limits' key, and the keys that are defaults of annotations (ingress-nginx's
`defaults.Backend`: an Ingress's own annotation of the same name overrides them).

Each validator takes the ConfigMap's text and returns the typed value, or raises InvalidValue with what to write
instead. Facts (names, defaults, where each lands in nginx.conf) are from ingress-nginx's configmap.md and
nginx.tmpl.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import re

from services.nginxconf import pcre
from services.nginxconf.render import RenderError, quote

from ..annotations import ANNOTATIONS
from ..annotations.base import InvalidValue
from ..annotations.validators import ip_network, pcre_regex

# ConfigMap keys that set the default of the annotation of the same name for every Ingress without it.
ANNOTATION_DEFAULTS = ("limit-rate", "limit-rate-after", "proxy-cookie-domain", "proxy-cookie-path",
                       "proxy-redirect-from", "proxy-redirect-to", "service-upstream", "use-port-in-redirects")

_HOST_NAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
# Variables a limit zone may be keyed by: the client address (as written by the real-ip rules), the host, or one
# request header, cookie or argument.
_ZONE_VARIABLE = re.compile(r"\$(?:binary_remote_addr|remote_addr|realip_remote_addr|host|server_name"
                            r"|http_[a-z0-9_]{1,64}|cookie_[A-Za-z0-9_]{1,64}|arg_[A-Za-z0-9_]{1,64})")
TICKET_KEY_SIZES = (48, 80)  # bytes: AES-128 or AES-256 session ticket keys (nginx's ssl_session_ticket_key)


def annotation_default(key: str, value: str) -> str:
    """The value of ANNOTATION_DEFAULTS key `key`, checked by its annotation's own validator."""
    return ANNOTATIONS[key].validate(value)


def syslog_host(value: str) -> str:
    """syslog-host: an IP address or a DNS name (nginx resolves it once, when it loads its configuration)."""
    text = value.strip()
    try:
        address = ip_network(text)
    except InvalidValue:
        if not _HOST_NAME.fullmatch(text):
            raise InvalidValue("must be an IP address or a DNS name, such as 10.0.0.5 or "
                               "syslog.logging.svc.cluster.local") from None
        return text
    if address.num_addresses != 1:
        raise InvalidValue("must be one address, not a network")
    return str(address.network_address)


def syslog_server(host: str, port: int) -> str:
    """nginx's syslog:server= address."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_addresses(value: str) -> tuple[str, ...]:
    """bind-address: IPv4 and IPv6 addresses (comma-separated) that nginx listens on instead of every address of
    their family; each must be an address of this node, or nginx cannot start."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise InvalidValue("must be IP addresses of this node separated by commas, such as 10.0.0.5,2001:db8::5")
    addresses = [ip_network(item) for item in items]
    if any(address.num_addresses != 1 for address in addresses):
        raise InvalidValue("must be addresses, not networks, such as 10.0.0.5")
    return tuple(dict.fromkeys(str(address.network_address) for address in addresses))


def debug_connections(value: str) -> tuple[str, ...]:
    """debug-connections: client addresses or networks (comma-separated) whose connections nginx logs at debug
    level whatever error-log-level says."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    return tuple(dict.fromkeys(str(ip_network(item)) for item in items))


def limit_conn_zone_variable(value: str) -> str:
    text = value.strip()
    if not _ZONE_VARIABLE.fullmatch(text):
        raise InvalidValue("must be one nginx variable naming the client: $binary_remote_addr (the default), "
                           "$remote_addr, $host, or a request header, cookie or argument ($http_x_api_key, "
                           "$cookie_session, $arg_user)")
    return text


def ssl_session_ticket_key(value: str) -> bytes:
    """ssl-session-ticket-key: base64 of 48 or 80 random bytes (`openssl rand 80 | openssl enc -A -base64`)."""
    try:
        key = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if len(key) not in TICKET_KEY_SIZES:
        raise InvalidValue("must be the base64 of 48 or 80 random bytes: make one with "
                           "`openssl rand 80 | openssl enc -A -base64`")
    return key


def ticket_key_file(key: bytes) -> str:
    """The name of the session ticket key's file in NginxPaths.ssl_dir (by digest: a new key reloads nginx)."""
    return f"tickets-{hashlib.sha256(key).hexdigest()[:16]}.key"


def gzip_disable(value: str) -> str:
    """gzip-disable: user agents (regular expressions, case-insensitive as nginx matches them, or nginx's word
    msie6) that get no gzip, separated by spaces."""
    words = value.split()
    if not words:
        raise InvalidValue('must be regular expressions of User-Agent values separated by spaces, such as "msie6"')
    for word in words:
        if word != "msie6":
            pcre_regex(word, ignore_case=True, engine=pcre.Engine.NGINX)
        try:
            quote(word)
        except RenderError as err:
            raise InvalidValue(str(err)) from None
    return " ".join(dict.fromkeys(words))
