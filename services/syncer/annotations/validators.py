"""Allow-list validators shared by annotations and the controller ConfigMap.

Each takes the raw string and returns its canonical form (so that equal meanings give equal location
profiles) or raises InvalidValue saying what a valid value looks like. Every pattern is matched against the
whole string, so a newline, quote, brace or semicolon can never ride along into nginx.conf.
"""
from __future__ import annotations

import functools
import ipaddress
import re
import ssl
from typing import Callable

from services.nginxconf import pcre
from services.nginxconf.render import BYTES_PER_UNIT

from .base import InvalidValue

_TRUE = frozenset({"1", "t", "true"})
_FALSE = frozenset({"0", "f", "false"})


def boolean(value: str) -> str:
    """"true"/"false" (also 1/0/t/f in any case, as Go's strconv.ParseBool takes them) → "true" or "false"."""
    lowered = value.lower()
    if lowered in _TRUE:
        return "true"
    if lowered in _FALSE:
        return "false"
    raise InvalidValue('must be "true" or "false"')


def is_true(canonical: str) -> bool:
    return canonical == "true"


_DURATION = re.compile(r"([0-9]{1,10})(ms|s|m|h)?")
_MS_PER_UNIT = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
# nginx keeps these timeouts as milliseconds in a 32-bit value; a larger one fails `nginx -t` for everyone.
_MAX_DURATION_MS = 2**31 - 1


def duration(value: str) -> str:
    """A timeout: seconds ("60") or with a unit ("500ms", "60s", "5m", "1h") → "60s" style."""
    match = _DURATION.fullmatch(value)
    if not match or int(match[1]) * _MS_PER_UNIT[match[2] or "s"] > _MAX_DURATION_MS:
        raise InvalidValue("must be a duration such as 60, 60s, 500ms, 5m or 1h, at most 596h")
    return f"{int(match[1])}{match[2] or 's'}"


def duration_seconds(canonical: str) -> float:
    """A duration as `duration` returns it ("500ms", "60s"), in seconds."""
    match = _DURATION.fullmatch(canonical)
    assert match, f"not a canonical duration: {canonical!r}"
    return int(match[1]) * _MS_PER_UNIT[match[2] or "s"] / 1000


_SIZE = re.compile(r"([0-9]{1,13})([kKmMgG]?)")


def size(max_bytes: int, min_bytes: int = 0) -> Callable[[str], str]:
    """A byte size such as 8k, 1m or 2g (lower-cased), from `min_bytes` to `max_bytes`."""
    def validate(value: str) -> str:
        match = _SIZE.fullmatch(value)
        unit = match[2].lower() if match else ""
        if not match or not min_bytes <= int(match[1]) * BYTES_PER_UNIT[unit] <= max_bytes:
            raise InvalidValue(f"must be a size such as 512, 8k, 1m or 2g, from {_human(min_bytes)} "
                               f"to {_human(max_bytes)}")
        return f"{int(match[1])}{unit}"
    return validate


def _human(nbytes: int) -> str:
    for unit in ("g", "m", "k"):
        if nbytes and nbytes % BYTES_PER_UNIT[unit] == 0:
            return f"{nbytes // BYTES_PER_UNIT[unit]}{unit}"
    return str(nbytes)


_INTEGER = re.compile(r"[0-9]{1,12}")


def integer(low: int, high: int) -> Callable[[str], str]:
    """A decimal integer in [low, high]."""
    def validate(value: str) -> str:
        if not _INTEGER.fullmatch(value) or not low <= int(value) <= high:
            raise InvalidValue(f"must be a whole number from {low} to {high}")
        return str(int(value))
    return validate


def one_of(*choices: str) -> Callable[[str], str]:
    """One of `choices`, compared case-insensitively, returned as spelled in `choices`."""
    by_lower = {c.lower(): c for c in choices}

    def validate(value: str) -> str:
        try:
            return by_lower[value.lower()]
        except KeyError:
            raise InvalidValue("must be one of " + ", ".join(choices)) from None
    return validate


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
HOSTNAME = rf"{_LABEL}(?:\.{_LABEL})*"
# A TCP port 1-65535 without leading zeros: a pattern, so that URL and origin patterns can embed it.
PORT = r"(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})"
_HOST_AND_PORT = re.compile(rf"{HOSTNAME}(?::{PORT})?")


def host_and_port(value: str) -> str:
    """A DNS name (or IPv4 address), optionally with ":port" (1-65535)."""
    if len(value) > 253 or not _HOST_AND_PORT.fullmatch(value):
        raise InvalidValue("must be a host name such as app.example.com, optionally with a port 1-65535 "
                           "such as app.example.com:8080")
    return value


_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?"
# NAME or NAMESPACE/NAME of a namespaced object: a namespace is a DNS label, a name a DNS subdomain.
_OBJECT_REFERENCE = re.compile(rf"(?:{_DNS_LABEL}/)?(?=[^/]{{1,253}}$){_DNS_LABEL}(?:\.{_DNS_LABEL})*")


def configmap_name(value: str) -> str:
    """NAME or NAMESPACE/NAME of a ConfigMap (the Ingress's namespace when none is given)."""
    if not _OBJECT_REFERENCE.fullmatch(value):
        raise InvalidValue("must name a ConfigMap as NAME or NAMESPACE/NAME, in lower case (such as auth-headers "
                           "or team-a/auth-headers)")
    return value


IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def ip_network(text: str) -> IPNetwork:
    """An IP address or CIDR ("10.0.0.0/8", "192.168.1.1", "2001:db8::/32"); host bits are cleared."""
    if "%" in text:
        # Python's ipaddress takes "fe80::1%<anything>" (any characters), Go's net.ParseCIDR and nginx's
        # allow/deny take no zone at all: a zone names an interface of this host, not a client network.
        raise InvalidValue(f"{text!r} has an IPv6 zone id (the part from '%'), which cannot match a client "
                           "address; write the address without it, such as fe80::1 or fe80::/64")
    try:
        # strict=False: "10.1.2.3/8" means its network, as Go's net.ParseCIDR (ingress-nginx) reads it.
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise InvalidValue(f"{text!r} is not an IP address or CIDR such as 10.0.0.0/8, 192.168.1.1 or "
                           "2001:db8::/32") from None


def pcre_regex(pattern: str, *, ignore_case: bool = False, engine: pcre.Engine = pcre.Engine.NGX_LUA,
               anchored: bool = False) -> None:
    """Raise InvalidValue, with PCRE's own message, unless `engine` (nginx's Lua by default) compiles `pattern`.

    `anchored`: the engine compiles "^" + pattern, as rewrite.lua does with a use-regex path; the message
    still points into `pattern`. No Python code runs these patterns, so PCRE is the only judge."""
    prefix = "^" if anchored else ""
    try:
        refused = pcre.refusal(prefix + pattern, engine, caseless=ignore_case)
    except pcre.PcreUnavailable as err:
        raise InvalidValue(str(err)) from None
    if refused is not None:
        offset = max(refused.offset - len(prefix), 0)
        where = f" at {pattern[offset:]!r}" if offset < len(pattern) else ""
        raise InvalidValue(f'{pattern!r} is not a valid regular expression: PCRE ({engine.value}) says '
                           f'"{refused.message}"{where}')


def matching(pattern: str, *, says: str) -> Callable[[str], str]:
    """A value the whole of which `pattern` matches; otherwise InvalidValue with `says` ("must be ...")."""
    compiled = re.compile(pattern)

    def validate(value: str) -> str:
        if not compiled.fullmatch(value):
            raise InvalidValue(says)
        return value
    return validate


# nginx's $cookie_<name> variables take these characters (affinity and canary cookies are read through them).
COOKIE_NAME = r"[A-Za-z0-9_-]{1,128}"
HEADER_NAME = r"[A-Za-z0-9-]{1,128}"


_CIPHERS = re.compile(r"[A-Za-z0-9!+@:._=-]{1,2000}")


def ssl_ciphers(value: str) -> str:
    """An OpenSSL cipher list that selects at least one cipher (nginx -t refuses one that selects none)."""
    if not _CIPHERS.fullmatch(value):
        raise InvalidValue("must be an OpenSSL cipher list such as ECDHE-RSA-AES128-GCM-SHA256:!aNULL")
    if not _openssl_selects_a_cipher(value):
        raise InvalidValue("selects no cipher OpenSSL knows, so nginx would refuse it; name at least one TLS 1.2 "
                           "cipher such as ECDHE-RSA-AES128-GCM-SHA256 (TLS 1.3 suites cannot be set here)")
    return value


@functools.lru_cache(maxsize=64)  # the model is rebuilt on every change; the ConfigMap rarely changes
def _openssl_selects_a_cipher(value: str) -> bool:
    # nginx's ssl_ciphers makes the same SSL_CTX_set_cipher_list call, with the same system libssl, and
    # `nginx -t` fails when it selects nothing (e.g. "!aNULL" alone, or a TLS 1.3 suite name).
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(value)
    except ssl.SSLError:
        return False
    return True
