"""Which hosts terminate TLS, with which Secret, and their Strict-Transport-Security header.

A host has TLS when some Ingress lists it in `spec.tls[].hosts` with a `secretName` naming a Secret of type
kubernetes.io/tls in the Ingress's namespace whose tls.crt and tls.key are present and valid base64 (an
entry without secretName uses --default-ssl-certificate). Whether they hold a matching certificate and key
is checked where they are loaded, not here. A "*.example.com" entry also covers "a.example.com".
"""
from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .configmap import ControllerConfig

TLS_SECRET_TYPE = "kubernetes.io/tls"


def secret_problem(secret: Mapping[str, Any] | None) -> str | None:
    """What makes `secret` unusable as a certificate, or None when it is usable."""
    if secret is None:
        return "not found"
    if secret.get("type") != TLS_SECRET_TYPE:
        return f"has type {secret.get('type')!r}, not {TLS_SECRET_TYPE}"
    data = secret.get("data") or {}
    for key in ("tls.crt", "tls.key"):
        try:
            if not base64.b64decode(data.get(key) or "", validate=True):
                return f"has no {key}"
        except (binascii.Error, TypeError, ValueError):
            return f"has a {key} that is not valid base64"
    return None


@dataclass(frozen=True)
class TlsEntry:
    """One validated spec.tls entry of an Ingress; hosts lower-cased, secret_name None for the default."""
    hosts: tuple[str, ...]
    secret_name: str | None


class TlsSecrets:
    """Checks each referenced Secret once per build."""

    def __init__(self, secrets: Mapping[tuple[str, str], Mapping[str, Any]], default_certificate: str | None) -> None:
        self._secrets = secrets
        self._default = default_certificate
        self._checked: dict[str, str | None] = {}

    def problem(self, ref: str) -> str | None:
        """`ref` is "namespace/name"; None when that Secret is a usable certificate."""
        if ref not in self._checked:
            namespace, _, name = ref.partition("/")
            self._checked[ref] = secret_problem(self._secrets.get((namespace, name)))
        return self._checked[ref]

    def for_ingress(self, namespace: str, entries: Iterable[TlsEntry]) -> tuple[dict[str, str], list[str]]:
        """host → "namespace/name" of the Secret from one Ingress's spec.tls, and why any entry was unusable."""
        certificates: dict[str, str] = {}
        problems: list[str] = []
        for entry in entries:
            ref = f"{namespace}/{entry.secret_name}" if entry.secret_name else self._default
            hosts = entry.hosts
            if ref is None:
                problems.append(f"TLS entry for {', '.join(hosts)} has no secretName and there is no "
                                "--default-ssl-certificate; served without TLS")
                continue
            problem = self.problem(ref)
            if problem:
                problems.append(f"TLS Secret {ref} {problem}; {', '.join(hosts) or 'its hosts'} served without it")
                continue
            for host in hosts:
                certificates.setdefault(host, ref)
        return certificates, problems


def certificate_for(host: str, certificates: Mapping[str, str]) -> str | None:
    """The Secret for `host`: an exact entry first, else a wildcard one level up."""
    found = certificates.get(host)
    if found is None and not host.startswith("*.") and "." in host:
        found = certificates.get("*." + host.split(".", 1)[1])
    return found


def hsts_header(config: ControllerConfig) -> str | None:
    """The Strict-Transport-Security value for https responses of TLS hosts, or None when hsts is off."""
    if not config.hsts:
        return None
    value = f"max-age={config.hsts_max_age}"
    if config.hsts_include_subdomains:
        value += "; includeSubDomains"
    if config.hsts_preload:
        value += "; preload"
    return value


def certificates_table(secrets: Mapping[tuple[str, str], Mapping[str, Any]], tls_secrets: Mapping[str, str],
                       default_certificate: str | None) -> dict[str, Any]:
    """The table nginx's SNI selection reads: PEMs by Secret, host → Secret, and the default certificate.

    Hosts without an entry get the default (--default-ssl-certificate when usable, else nginx's
    generated fake certificate). Whether a key matches its certificate is checked when nginx loads them.
    """
    refs = set(tls_secrets.values())
    default = default_certificate if default_certificate and secret_problem(
        secrets.get(tuple(default_certificate.split("/", 1)))) is None else None
    if default:
        refs.add(default)
    certs = {}
    for ref in sorted(refs):
        data = secrets[tuple(ref.split("/", 1))]["data"]
        certs[ref] = {"cert": base64.b64decode(data["tls.crt"]).decode("ascii", "replace"),
                      "key": base64.b64decode(data["tls.key"]).decode("ascii", "replace")}
    return {"certs": certs, "hosts": dict(sorted(tls_secrets.items())), "default": default}
