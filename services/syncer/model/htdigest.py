"""A digest-auth Secret → the htdigest file pyngress's digest check (templates/lua/pyngress/digest_auth.lua)
reads: one `user:realm:HA1` line per user, HA1 being MD5(user:realm:password) in hex, as Apache's htdigest
writes it and as the nginx module ingress-nginx uses reads it.

auth-file: the `auth` key holds htdigest lines; auth-map: each key is a user and its value `realm:HA1`. Only
the lines of the Ingress's auth-realm can ever match a challenge for that realm: the others are left out,
and a Secret without any is refused (every user would be turned away). Messages name users and lines,
never a hash.
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from .htpasswd import InvalidHtpasswd, SecretType, secret_entries

_HA1 = re.compile(rb"[0-9a-fA-F]{32}")
_HOW_TO_HASH = "write it with htdigest, or as user:realm:md5hex(user:realm:password)"


def htdigest_file(secret: Mapping[str, Any], secret_type: SecretType, realm: str) -> bytes:
    """The lines of `secret` for `realm`, each checked."""
    lines = []
    for user, value, where in secret_entries(secret, secret_type):
        line_realm, colon, ha1 = value.rpartition(b":")
        if not colon or not _HA1.fullmatch(ha1):
            raise InvalidHtpasswd(f"{where}: user {user!r} needs realm:HA1 (32 hexadecimal digits) after the user; "
                                  f"{_HOW_TO_HASH}")
        if line_realm.decode("utf-8", "replace") == realm:
            lines.append(user.encode() + b":" + line_realm + b":" + ha1.lower() + b"\n")
    if not lines:
        raise InvalidHtpasswd(f"has no user of realm {realm!r} (the auth-realm annotation; digest hashes are made "
                              "for one realm)")
    return b"".join(lines)
