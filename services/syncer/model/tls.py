"""Which hosts terminate TLS, with which Secret, and their Strict-Transport-Security header.

Which certificate a host gets, as ingress-nginx chooses it (the oldest Ingress first):
1. an Ingress lists the host in `spec.tls[].hosts`: that entry's Secret (an entry without secretName
   uses --default-ssl-certificate); a "*.example.com" entry also covers "a.example.com";
2. else a Secret from the same Ingress's spec.tls whose certificate names the host (its DNS
   subjectAltNames, or its common name when it has none; "*." stands for one label);
3. else no TLS of its own: nginx serves the default certificate (--default-ssl-certificate, else its
   generated "Kubernetes Ingress Controller Fake Certificate").
A Secret is usable when it has type kubernetes.io/tls, its tls.crt and tls.key are valid base64 and
OpenSSL loads them as a certificate with its key; otherwise its hosts are served without it, with a
problem saying why. A host its own Ingress lists in spec.tls stays a TLS host either way (redirect to
HTTPS, HSTS), served with the default certificate, as ingress-nginx does.
"""
from __future__ import annotations

import base64
import binascii
import collections
import functools
import ssl
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .configmap import ControllerConfig
from .layered import Layered
from .openssl import certificate_problem, decode_certificate

TLS_SECRET_TYPE = "kubernetes.io/tls"


def secret_problem(secret: Mapping[str, Any] | None) -> str | None:
    """What makes `secret` unusable as a certificate, or None when it is usable."""
    if secret is None:
        return "not found"
    if secret.get("type") != TLS_SECRET_TYPE:
        return f"has type {secret.get('type')!r}, not {TLS_SECRET_TYPE}"
    data = secret.get("data") or {}
    pems = []
    for key in ("tls.crt", "tls.key"):
        try:
            pems.append(base64.b64decode(data.get(key) or "", validate=True))
        except (binascii.Error, TypeError, ValueError):
            return f"has a {key} that is not valid base64"
        if not pems[-1]:
            return f"has no {key}"
    return inspect_certificate(*pems).problem


@dataclass(frozen=True)
class CertificateInfo:
    """What the syncer needs from a certificate: the host names it is for, or why it cannot be served."""
    names: tuple[str, ...]  # lower-case DNS names: subjectAltNames, else the common name
    problem: str | None


# Keyed by content: a Secret is inspected again only when it changes (OpenSSL takes ~1 ms per pair).
@functools.lru_cache(maxsize=4096)
def inspect_certificate(cert_pem: bytes, key_pem: bytes) -> CertificateInfo:
    """The names of the first certificate in `cert_pem`, and whether `key_pem` is its private key."""
    problem = certificate_problem(cert_pem.decode("ascii", "replace"), key_pem.decode("ascii", "replace"))
    if problem:
        return CertificateInfo((), f"holds a tls.crt and tls.key that OpenSSL cannot serve: {problem}")
    try:
        decoded = decode_certificate(cert_pem)
    except (ssl.SSLError, OSError) as err:
        return CertificateInfo((), f"has a tls.crt whose certificate cannot be read ({err})")
    names = tuple(value.lower() for kind, value in decoded.get("subjectAltName", ()) if kind == "DNS")
    if not names:
        names = tuple(value.lower() for rdn in decoded.get("subject", ()) for key, value in rdn
                      if key == "commonName")
    return CertificateInfo(names, None)


def names_match(host: str, names: Iterable[str]) -> bool:
    """Whether a certificate for `names` is valid for `host` ("*.example.com" covers one label)."""
    for name in names:
        if name == host:
            return True
        if name.startswith("*.") and "." in host and not host.startswith("*."):
            if host.split(".", 1)[1] == name[2:]:
                return True
    return False


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
            self._checked[ref] = secret_problem(self._secret(ref))
        return self._checked[ref]

    def names(self, ref: str) -> tuple[str, ...]:
        """The host names the certificate of a usable Secret `ref` is for."""
        secret = self._secret(ref)
        assert secret is not None, "names() is asked only of a usable Secret"
        data = secret["data"]
        return inspect_certificate(base64.b64decode(data["tls.crt"]), base64.b64decode(data["tls.key"])).names

    def pems(self, ref: str) -> dict[str, str]:
        """{"cert": PEM, "key": PEM} of a usable Secret `ref` (a TLS listener in Terminate mode's, for the proxy)."""
        secret = self._secret(ref)
        assert secret is not None, "pems() is asked only of a usable Secret"
        return _pems(secret["data"]["tls.crt"], secret["data"]["tls.key"])

    def _secret(self, ref: str) -> Mapping[str, Any] | None:
        return self._secrets.get(_secret_key(ref))

    def for_ingress(self, namespace: str, entries: Iterable[TlsEntry]) -> tuple[dict[str, str], list[str]]:
        """host → "namespace/name" of the Secret from one Ingress's spec.tls, and why any entry was unusable.

        Hosts the entries list come first; then the names in their certificates (which may be wildcards),
        so that a host the Ingress's rules name but its spec.tls forgot still finds its certificate.
        """
        certificates: dict[str, str] = {}
        by_name: dict[str, str] = {}
        problems: list[str] = []
        for entry in entries:
            ref = f"{namespace}/{entry.secret_name}" if entry.secret_name else self._default
            hosts = entry.hosts
            if ref is None:
                problems.append(f"TLS entry for {', '.join(hosts)} has no secretName and there is no "
                                "--default-ssl-certificate; served with the generated fake certificate")
                continue
            problem = self.problem(ref)
            if problem:
                problems.append(f"TLS Secret {ref} {problem}; {', '.join(hosts) or 'its hosts'} served with the "
                                "default certificate")
                continue
            names = self.names(ref)
            for host in hosts:
                certificates.setdefault(host, ref)
                if not names_match(host, names):
                    problems.append(f"TLS Secret {ref} holds a certificate for {', '.join(names) or 'no host name'}, "
                                    f"not {host}; clients that check host names will refuse it")
            for name in names:
                by_name.setdefault(name, ref)
        for name, ref in by_name.items():
            certificates.setdefault(name, ref)
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


class CertificatesTable:
    """The table nginx's SNI selection reads: PEMs by Secret ("certs"), host → Secret ("hosts"), and the default
    certificate ("default"), kept from one model to the next (kept_tables.py).

    Hosts without an entry get the default (--default-ssl-certificate when usable, else nginx's generated fake
    certificate). Whether a key matches its certificate is checked when nginx loads them. A step makes again the
    entries of the Secrets its TLS hosts took or left, and of those replaced in the store among the Secrets of the
    hosts it looked at: made whole at every change, with a set, a sort and a comparison of every entry, the table
    cost 15-45 ms a change at 10,000 certificates."""

    def __init__(self) -> None:
        self._users: dict[str, int] = {}  # Secret → the TLS hosts naming it, and 1 more while it is the default
        self._made_of: dict[str, Any] = {}  # Secret → the data (a store object's) its entry was made from
        self._certs: Layered[str, dict[str, str]] = Layered()
        self._default: str | None = None
        self.entries_made = 0  # certificate entries made (not kept), for the tests that count a change's work

    def whole(self, secrets: Mapping[tuple[str, str], Mapping[str, Any]], hosts: Mapping[str, str], *,
              default_certificate: str | None) -> dict[str, Any]:
        """The table of the TLS hosts `hosts` (host → "namespace/name" of a usable Secret), made whole."""
        default = _usable_default(secrets, default_certificate)
        users = collections.Counter(hosts.values())
        if default:
            users[default] += 1
        self._made_of = {}
        certs = {ref: self._made(secrets, ref) for ref in users}
        self._users, self._certs, self._default = dict(users), Layered(dict(certs)), default
        return {"certs": certs, "hosts": hosts, "default": default}

    def step(self, secrets: Mapping[tuple[str, str], Mapping[str, Any]], *, hosts: Mapping[str, str],
             before: Mapping[str, str], looked: Iterable[str],
             default_certificate: str | None) -> tuple[dict[str, Any], frozenset[str]]:
        """The table of `hosts`, which differs from `before` (the last step's) only at the hosts `looked` at; and its
        keys that changed ("certs/<Secret>", "hosts/<host>", "default"), as the certificates delta names them."""
        default = _usable_default(secrets, default_certificate)
        uses: collections.Counter[str] = collections.Counter()
        changed: set[str] = set()
        checked = {default} if default else set()  # Secrets whose store object may have been replaced
        for host in looked:
            old, new = before.get(host), hosts.get(host)
            if new is not None:
                checked.add(new)
            if old != new:
                changed.add(f"hosts/{host}")
                uses.update({ref: step for ref, step in ((old, -1), (new, 1)) if ref is not None})
        if default != self._default:
            changed.add("default")
            uses.update({ref: step for ref, step in ((self._default, -1), (default, 1)) if ref is not None})
        entries: dict[str, dict[str, str] | None] = {}
        for ref, use in uses.items():
            was = self._users.get(ref, 0)
            if was + use > 0:
                self._users[ref] = was + use
                if not was:
                    entries[ref] = self._made(secrets, ref)
            elif was:
                del self._users[ref], self._made_of[ref]
                entries[ref] = None
        for ref in checked - entries.keys():
            if secrets[_secret_key(ref)]["data"] is not self._made_of[ref]:
                entries[ref] = self._made(secrets, ref)
        self._certs, self._default = self._certs.changed(entries), default
        changed.update(f"certs/{ref}" for ref in entries)
        return {"certs": self._certs, "hosts": hosts, "default": default}, frozenset(changed)

    def _made(self, secrets: Mapping[tuple[str, str], Mapping[str, Any]], ref: str) -> dict[str, str]:
        data = self._made_of[ref] = secrets[_secret_key(ref)]["data"]
        self.entries_made += 1
        return _pems(data["tls.crt"], data["tls.key"])


def _usable_default(secrets: Mapping[tuple[str, str], Mapping[str, Any]], default_certificate: str | None) -> str | None:
    """--default-ssl-certificate when its Secret is usable, else None (nginx's generated fake certificate)."""
    if default_certificate and secret_problem(secrets.get(_secret_key(default_certificate))) is None:
        return default_certificate
    return None


@functools.lru_cache(maxsize=1 << 17)
def _pems(cert_base64: str, key_base64: str) -> dict[str, str]:
    """A Secret's certificate and key as the certificates table holds them. Kept: a Secret replaced by an equal one (a
    relist) gives the same entry object, which the pusher sees unchanged by identity; and a table made whole (a model
    built afresh) decodes no PEMs again. Bounded: 131,072 Secrets."""
    return {"cert": base64.b64decode(cert_base64).decode("ascii", "replace"),
            "key": base64.b64decode(key_base64).decode("ascii", "replace")}


def _secret_key(ref: str) -> tuple[str, str]:
    """"namespace/name" → (namespace, name), the key of a Secret in the store's view."""
    namespace, _, name = ref.partition("/")
    return namespace, name
