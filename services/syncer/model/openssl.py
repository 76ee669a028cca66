"""The model's one door to the OpenSSL that nginx links: whether PEM content loads as nginx would load it.

Content in, verdict out: the PEM goes through anonymous in-memory files (memfd) or the `openssl` command's
stdin, and nothing is written where anything else reads it. tests/unit/test_layers.py lets this module, and
no other of the model, use `os` writes and `subprocess`.
"""
from __future__ import annotations

import functools
import os
import ssl
import subprocess
from typing import Any


def certificate_problem(cert_pem: str, key_pem: str) -> str | None:
    """Why OpenSSL would not serve this certificate chain with this key, or None."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert_fd, key_fd = os.memfd_create("cert"), os.memfd_create("key")
    try:
        os.write(cert_fd, cert_pem.encode())
        os.write(key_fd, key_pem.encode())
        # An encrypted key would make OpenSSL ask for a password: refuse it instead.
        context.load_cert_chain(f"/proc/self/fd/{cert_fd}", f"/proc/self/fd/{key_fd}", password=lambda: b"")
        return None
    except ssl.SSLError as err:
        return f"certificate and key do not load together ({err.reason or err})"
    finally:
        os.close(cert_fd)
        os.close(key_fd)


def decode_certificate(cert_pem: bytes) -> dict[str, Any]:
    """The first certificate of `cert_pem` as the ssl module decodes a peer's (subject, issuer, notAfter,
    serialNumber, subjectAltName). Raises ssl.SSLError or OSError when it cannot be read."""
    fd = os.memfd_create("tls.crt")
    try:
        os.write(fd, cert_pem)
        # The stdlib's only X.509 reader; private, so typeshed leaves it out.
        return ssl._ssl._test_decode_cert(f"/proc/self/fd/{fd}")  # type: ignore[attr-defined]
    finally:
        os.close(fd)


@functools.lru_cache(maxsize=16)  # keyed by content: the model is rebuilt on every change
def dh_params_problem(content: bytes) -> str | None:
    """Why OpenSSL (the one nginx links) cannot read `content` as DH parameters, or None."""
    if len(content) > 64 * 1024:
        return "is larger than 64 KiB"
    result = subprocess.run(["openssl", "dhparam", "-noout"], input=content, capture_output=True, timeout=30)
    if result.returncode != 0 or b"-----BEGIN DH PARAMETERS-----" not in content:
        return "OpenSSL cannot read it as PEM DH parameters (-----BEGIN DH PARAMETERS-----)"
    return None
