"""BackendTLSPolicies → the TLS nginx speaks to the Services they target, on the Ingresses' proxy-ssl-* profile.

A policy targets Services of its own namespace (targetRefs are local references: a tenant's policy never reaches
another namespace's Service, nor its caCertificateRefs another namespace's ConfigMap), optionally one port by name
(sectionName). For a backendRef, the policies naming its Service and port come first, then those naming the Service
alone; among those, the oldest (then "namespace/name") applies and the others are Conflicted. An applied policy makes
the rule's location profile verify the backend (proxy_ssl_verify on) against the ConfigMaps' ca.crt (ca_bundles.py),
or with wellKnownCACertificates: System the CAs the system trusts (the file render.py names), with
validation.hostname as SNI and as the name the certificate must hold; the Gateway's spec.tls.backend
clientCertificateRef (upstream_tls.py) is shown to the backend. nginx verifies one name, so subjectAltNames are not
supported: such a policy is not accepted (reason Invalid) and, as for one whose CA does not resolve
(NoValidCACertificate), the requests to the backends it targets answer 500 rather than go unverified.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Mapping

from services.nginxconf.config import BackendTls

from ..creation import creation_order
from . import fields
from .ca_bundles import ca_bundle
from .fields import RouteRejected
from .reasons import Reason

# The spec's reasons (PolicyConditionReason, BackendTLSPolicyReason).
ACCEPTED = "Accepted"
CONFLICTED = "Conflicted"
INVALID = "Invalid"
NO_VALID_CA_CERTIFICATE = "NoValidCACertificate"
RESOLVED_REFS = "ResolvedRefs"
VERIFY_DEPTH = 3  # intermediate CAs the backend's chain may hold
PROTOCOLS = "TLSv1.2 TLSv1.3"


@dataclass(frozen=True)
class PolicyVerdict:
    """One BackendTLSPolicy as it applies: its TLS, or why it is refused (with its conditions' reasons)."""
    namespace: str
    name: str
    order: tuple[datetime, str]
    targets: tuple[tuple[str, str | None], ...]  # (Service, sectionName or None)
    tls: BackendTls | None = None  # None: refused (accepted_reason says why)
    ca_pem: bytes = b""
    accepted_reason: str = ACCEPTED
    accepted_message: str = "the policy is accepted"
    resolved_reason: str = RESOLVED_REFS
    resolved_message: str = "every caCertificateRef resolves"

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class AppliedTls:
    """What a backendRef's Service gets: the policy that applies (refused or not), and the ones it wins over."""
    policy: PolicyVerdict
    conflicted: tuple[PolicyVerdict, ...] = ()


@dataclass
class BackendTlsPolicies:
    """The store's BackendTLSPolicies, each judged once, looked up by the backend they target."""
    verdicts: dict[tuple[str, str], PolicyVerdict] = field(default_factory=dict)  # (namespace, name) → verdict

    @classmethod
    def of(cls, policies: Mapping[tuple[str, str], Mapping[str, Any]],
           config_maps: Mapping[tuple[str, str], Mapping[str, Any]]) -> BackendTlsPolicies:
        return cls({key: _verdict(policy, namespace=key[0], name=key[1], config_maps=config_maps)
                    for key, policy in sorted(policies.items())})

    def for_service(self, namespace: str, service: str, port_name: str | None) -> AppliedTls | None:
        """The policy that applies to `service`'s port named `port_name` (None: the port has no name), or None."""
        def naming(section: str | None) -> list[PolicyVerdict]:
            return sorted((v for v in self.verdicts.values() if v.namespace == namespace
                           and (service, section) in v.targets), key=lambda v: v.order)
        for candidates in (naming(port_name) if port_name else [], naming(None)):
            if candidates:
                return AppliedTls(candidates[0], tuple(candidates[1:]))
        return None


def ca_file_name(pem: bytes) -> str:
    """The file in NginxPaths.ssl_dir holding a policy's CA bundle, named by its content."""
    return f"gateway-ca-{hashlib.sha256(pem).hexdigest()[:16]}.pem"


def _verdict(policy: Mapping[str, Any], *, namespace: str, name: str,
             config_maps: Mapping[tuple[str, str], Mapping[str, Any]]) -> PolicyVerdict:
    spec = _mapping(policy.get("spec"))
    targets = tuple((str(ref.get("name")), ref.get("sectionName") or None) for ref in spec.get("targetRefs") or ()
                    if isinstance(ref, dict) and (ref.get("group") or "", ref.get("kind")) == ("", "Service"))
    base = PolicyVerdict(namespace, name, creation_order(policy, namespace=namespace, name=name), targets)
    where = f"BackendTLSPolicy {namespace}/{name}"
    validation = _mapping(spec.get("validation"))
    try:
        hostname = fields.precise_hostname(validation.get("hostname"), where=f"{where} validation")
    except RouteRejected as err:
        return _refused(base, INVALID, str(err))
    if validation.get("subjectAltNames"):
        return _refused(base, INVALID, f"{where}: validation.subjectAltNames is not supported (nginx verifies the "
                                       "backend's certificate for one name, validation.hostname); remove it")
    well_known = validation.get("wellKnownCACertificates")
    if well_known is not None and (well_known != "System" or validation.get("caCertificateRefs")):
        return _refused(base, INVALID, f"{where}: validation.wellKnownCACertificates {well_known!r} must be System, "
                                       "without caCertificateRefs")
    if well_known == "System":
        return replace(base, tls=BackendTls(ca_file=None, verify="on", depth=VERIFY_DEPTH, protocols=PROTOCOLS,
                                            name=hostname, server_name="on"))
    bundle = ca_bundle(validation.get("caCertificateRefs"), namespace=namespace, where=where, config_maps=config_maps,
                       kind_reason=Reason.INVALID_KIND)
    if bundle.problems or bundle.pem is None:
        problem = bundle.problems[0] if bundle.problems else None
        message = problem.message if problem else f"{where}: validation.caCertificateRefs names no ConfigMap"
        return replace(base, accepted_reason=NO_VALID_CA_CERTIFICATE,
                       accepted_message=f"{message}; the backends it targets answer 500",
                       resolved_reason=str(problem.reason) if problem else INVALID, resolved_message=message)
    pem = bundle.pem.encode()
    tls = BackendTls(ca_file=ca_file_name(pem), verify="on", depth=VERIFY_DEPTH, protocols=PROTOCOLS, name=hostname,
                     server_name="on")
    return replace(base, tls=tls, ca_pem=pem)


def _refused(base: PolicyVerdict, reason: str, message: str) -> PolicyVerdict:
    return replace(base, accepted_reason=reason, accepted_message=message)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}
