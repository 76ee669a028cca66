"""Real password hashes for basic-auth tests, made by the tools a user would use (openssl, libcrypt)."""
from __future__ import annotations

import base64
import ctypes
import hashlib
import os
import subprocess

_OPENSSL_SCHEMES = {"apr1": "-apr1", "md5": "-1", "sha256": "-5", "sha512": "-6"}
_CRYPT_PREFIXES = {"bcrypt": b"$2y$", "yescrypt": b"$y$"}


def hash_password(password: str, scheme: str = "apr1") -> str:
    """`password` hashed with `scheme`: apr1, md5, sha256, sha512 (openssl passwd), bcrypt, yescrypt
    (libcrypt, as htpasswd -B and mkpasswd make them), sha or ssha (as htpasswd -s and slappasswd)."""
    if scheme in _OPENSSL_SCHEMES:
        return subprocess.run(["openssl", "passwd", _OPENSSL_SCHEMES[scheme], "-stdin"], input=password,
                              capture_output=True, text=True, check=True).stdout.strip()
    if scheme == "sha":
        return "{SHA}" + base64.b64encode(hashlib.sha1(password.encode()).digest()).decode()
    if scheme == "ssha":
        salt = os.urandom(8)
        return "{SSHA}" + base64.b64encode(hashlib.sha1(password.encode() + salt).digest() + salt).decode()
    libcrypt = ctypes.CDLL("libcrypt.so.1")
    libcrypt.crypt_gensalt.restype = libcrypt.crypt.restype = ctypes.c_char_p
    libcrypt.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    libcrypt.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    setting = libcrypt.crypt_gensalt(_CRYPT_PREFIXES[scheme], 0, None, 0)
    return libcrypt.crypt(password.encode(), setting).decode()


def basic_auth_secret(name: str, users: dict[str, str], *, namespace: str = "default", scheme: str = "apr1",
                      secret_type: str = "auth-file") -> dict:
    """An Opaque Secret for auth-secret: an htpasswd file in `auth` (auth-file) or one key per user (auth-map)."""
    hashes = {user: hash_password(password, scheme) for user, password in users.items()}
    if secret_type == "auth-file":
        data = {"auth": "".join(f"{user}:{h}\n" for user, h in hashes.items())}
    else:
        data = hashes
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}


def digest_auth_secret(name: str, users: dict[str, str], *, realm: str, namespace: str = "default",
                       secret_type: str = "auth-file") -> dict:
    """An Opaque Secret for auth-type digest: htdigest lines (user:realm:HA1) in `auth` (auth-file), as Apache's
    htdigest writes them, or one key per user holding realm:HA1 (auth-map)."""
    ha1 = {user: hashlib.md5(f"{user}:{realm}:{password}".encode()).hexdigest() for user, password in users.items()}
    if secret_type == "auth-file":
        data = {"auth": "".join(f"{user}:{realm}:{h}\n" for user, h in ha1.items())}
    else:
        data = {user: f"{realm}:{h}" for user, h in ha1.items()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {"name": name, "namespace": namespace},
            "data": {key: base64.b64encode(value.encode()).decode() for key, value in data.items()}}
