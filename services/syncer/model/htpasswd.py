"""A basic-auth Secret → the htpasswd file nginx's auth_basic reads, each password hash checked first.

Accepted hashes are those nginx checks on Debian: the ones nginx computes itself (Apache's $apr1$ MD5,
{SHA}, {SSHA}) and the crypt(3) schemes the system's libxcrypt supports (bcrypt $2y$/$2b$/$2a$, yescrypt
$y$, SHA-512 $6$, SHA-256 $5$, MD5 $1$, DES), which nginx hands to crypt_r. A line nginx could not check
(another scheme, a truncated hash, {PLAIN} clear text) refuses the Secret with a message naming its user;
nginx would answer that user 500 or let a clear-text password sit in a file. Messages name users and
lines, never a hash.
"""
from __future__ import annotations

import base64
import binascii
import ctypes
import functools
import re
from typing import Any, Literal, Mapping

SecretType = Literal["auth-file", "auth-map"]

_B64 = r"[A-Za-z0-9+/]+={0,2}"
_SALT_CHARS = r"[./0-9A-Za-z]"
# Shapes of whole hashes: a hash cut short or padded passes crypt's salt check but never matches.
_NGINX_NATIVE = re.compile(rf"\$apr1\${_SALT_CHARS}{{0,8}}\${_SALT_CHARS}{{22}}|\{{SHA\}}{_B64}|\{{SSHA\}}{_B64}")
_CRYPT = re.compile(
    rf"\$2[aby]\$[0-9]{{2}}\${_SALT_CHARS}{{53}}"
    rf"|\$y\${_SALT_CHARS}+\${_SALT_CHARS}+\${_SALT_CHARS}{{43}}"
    rf"|\$6\$(?:rounds=[0-9]{{1,9}}\$)?[^$:]{{1,16}}\${_SALT_CHARS}{{86}}"
    rf"|\$5\$(?:rounds=[0-9]{{1,9}}\$)?[^$:]{{1,16}}\${_SALT_CHARS}{{43}}"
    rf"|\$1\$[^$:]{{0,8}}\${_SALT_CHARS}{{22}}"
    rf"|{_SALT_CHARS}{{13}}")
_SHA_DIGEST_BYTES = 20
# libxcrypt's crypt_checksalt(): OK, and schemes it still computes though it calls them legacy or cheap.
_CRYPT_COMPUTES = frozenset({0, 3, 4})
_USER = re.compile(r"[^\x00-\x1f\x7f:#][^\x00-\x1f\x7f:]{0,255}")
_HOW_TO_HASH = "hash it with htpasswd -B (bcrypt) or -m (MD5), or openssl passwd -6"


class InvalidHtpasswd(ValueError):
    """A Secret nginx could not check passwords against; the message says which user and what to change."""


def secret_entries(secret: Mapping[str, Any], secret_type: SecretType) -> list[tuple[str, bytes, str]]:
    """(user, what the Secret says of it, where) from its `auth` key (auth-file) or one key per user (auth-map);
    each user name checked."""
    data = _secret_data(secret)
    if secret_type == "auth-file":
        if "auth" not in data:
            raise InvalidHtpasswd("has no key named auth (auth-secret-type auth-file expects an htpasswd file "
                                  "there; set auth-secret-type: auth-map for one key per user)")
        entries = _file_entries(data["auth"])
    else:
        entries = [(user, value.strip(b"\r\n"), f"key {user}") for user, value in sorted(data.items())]
    for user, _, where in entries:
        if not _USER.fullmatch(user):
            raise InvalidHtpasswd(f"{where}: user {user!r} may not be empty, start with '#' or hold ':' or control "
                                  "characters")
    return entries


def htpasswd_file(secret: Mapping[str, Any], secret_type: SecretType) -> bytes:
    """The htpasswd file for `secret`: its `auth` key (auth-file) or one key per user (auth-map)."""
    lines = []
    for user, password_hash, where in secret_entries(secret, secret_type):
        problem = hash_problem(password_hash.decode("ascii", "replace"))
        if problem:
            raise InvalidHtpasswd(f"{where}: the password hash of user {user!r} {problem}; {_HOW_TO_HASH}")
        lines.append(user.encode() + b":" + password_hash + b"\n")
    return b"".join(lines)


def _secret_data(secret: Mapping[str, Any]) -> dict[str, bytes]:
    """The Secret's keys and decoded values; stringData (as kubectl apply sends it) wins, as in the API."""
    decoded = {}
    for key, value in (secret.get("data") or {}).items():
        try:
            decoded[str(key)] = base64.b64decode(value if isinstance(value, str) else "", validate=True)
        except (binascii.Error, ValueError):
            raise InvalidHtpasswd(f"has a key {key} whose value is not valid base64") from None
    for key, value in (secret.get("stringData") or {}).items():
        decoded[str(key)] = str(value).encode()
    return decoded


def _file_entries(content: bytes) -> list[tuple[str, bytes, str]]:
    """(user, what follows its ':', "auth line N") of each line of an htpasswd-like file."""
    entries = []
    for number, raw in enumerate(content.split(b"\n"), start=1):
        line = raw.rstrip(b"\r")
        if not line.strip() or line.startswith(b"#"):  # nginx skips them too
            continue
        user, colon, password_hash = line.partition(b":")
        where = f"auth line {number}"
        if not colon:
            raise InvalidHtpasswd(f"{where} is not user:hash")
        entries.append((user.decode("utf-8", "replace"), password_hash, where))
    return entries


@functools.lru_cache(maxsize=65536)  # keyed by content: the model is rebuilt on every change
def hash_problem(password_hash: str) -> str | None:
    """Why nginx could not check a password against `password_hash`, or None."""
    if password_hash.startswith("{PLAIN}"):
        return "is the password in clear text ({PLAIN}), which pyngress refuses to store"
    if _NGINX_NATIVE.fullmatch(password_hash):
        if password_hash.startswith("{S"):
            digest = base64.b64decode(password_hash.split("}", 1)[1] + "==")
            if len(digest) < _SHA_DIGEST_BYTES or (password_hash.startswith("{SHA}")
                                                   and len(digest) != _SHA_DIGEST_BYTES):
                return "is not a whole SHA-1 digest"
        return None
    if not _CRYPT.fullmatch(password_hash):
        return "is not one nginx can check (bcrypt, yescrypt, SHA-512/256 or MD5 crypt, $apr1$, {SHA} or {SSHA})"
    if not _system_crypt_computes(password_hash):
        return "uses a crypt scheme this system's libcrypt does not compute"
    return None


@functools.cache
def _checksalt() -> Any:
    try:
        function = ctypes.CDLL("libcrypt.so.1").crypt_checksalt
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [ctypes.c_char_p], ctypes.c_int
    return function


def _system_crypt_computes(password_hash: str) -> bool:
    """Whether the libcrypt nginx's workers call (crypt_r, the same library) computes this scheme."""
    checksalt = _checksalt()
    return checksalt is not None and checksalt(password_hash.encode()) in _CRYPT_COMPUTES
