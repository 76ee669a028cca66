"""The webhook's certificate and key, re-read when their files change (cert-manager, or the certgen Job of
ingress-nginx's chart, rotates them in a mounted Secret) without a restart.

Each new connection takes `current()`: the files are looked at (a stat of each) at most once a CHECK_SECONDS,
and a new SSLContext is built only when one of them changed (inode, size or mtime: a Secret volume swaps a
symlink, a copy rewrites the file). A pair that does not load (the certificate written, the key not yet) keeps
the previous context serving and is tried again at the next check; connections already open keep theirs.
"""
from __future__ import annotations

import logging
import os
import ssl
import time

from services.common.logs import kv

log = logging.getLogger("webhook")

CHECK_SECONDS = 1.0

_Signature = tuple[tuple[int, int, int], ...]


class CertificateError(RuntimeError):
    """The certificate or key cannot be used; the message names the flag and the file."""


def server_context(certificate: str, key: str) -> ssl.SSLContext:
    """A TLS server context for this pair (TLS 1.2 or newer, HTTP/1.1 offered by ALPN)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(certificate, key)
    except (OSError, ssl.SSLError) as err:
        raise CertificateError(f"cannot load --validating-webhook-certificate={certificate} with "
                               f"--validating-webhook-key={key}: {err}") from None
    return context


class ReloadingCertificate:
    def __init__(self, certificate: str, key: str) -> None:
        self.certificate, self.key = certificate, key
        self._signature = self._stat()
        self._context = server_context(certificate, key)  # CertificateError at start: nothing to fall back on
        self._checked = time.monotonic()

    def _stat(self) -> _Signature:
        stats = []
        for path in (self.certificate, self.key):
            try:
                st = os.stat(path)
                stats.append((st.st_ino, st.st_size, st.st_mtime_ns))
            except OSError:
                stats.append((0, 0, 0))
        return tuple(stats)

    def current(self) -> ssl.SSLContext:
        now = time.monotonic()
        if now - self._checked >= CHECK_SECONDS:
            self._checked = now
            signature = self._stat()
            if signature != self._signature:
                try:
                    self._context = server_context(self.certificate, self.key)
                except CertificateError as err:
                    log.warning("the new certificate or key does not load yet; serving the previous one",
                                extra=kv(error=err))
                else:
                    self._signature = signature
                    log.info("certificate reloaded", extra=kv(certificate=self.certificate))
        return self._context
