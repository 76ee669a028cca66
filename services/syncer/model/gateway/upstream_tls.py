"""TLS from nginx to a route rule's backends: the BackendTLSPolicies of their Services (backend_tls_policies.py) and
the client certificate of the Gateways the route is attached to (spec.tls.backend.clientCertificateRef), as one
location profile's proxy-ssl-* settings (services/nginxconf/config.py BackendTls, the Ingresses' own).

One location profile verifies one way, so a rule's backends share one policy: a backend whose Service another
(or no) policy covers than the rule's first verified backend answers 500 for its share, with a warning, rather than be
reached unverified. A backend whose policy is refused (its CA does not resolve, a field pyngress does not support)
answers 500 too, as the spec asks.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from services.nginxconf.config import BackendScheme, BackendTls

from ..backends import ResolvedBackend, ServiceRef
from ..tls import TlsSecrets
from .backend_tls_policies import BackendTlsPolicies, PolicyVerdict
from .attachment import Attachment
from .fields import RouteRejected
from .httproutes import RoutePlan
from .listeners import gateways_oldest_first
from .objects import GATEWAY_GROUP, GatewayObjects
from .reasons import Reason
from .reference_grants import ReferenceGrants

_TLS_SCHEMES: dict[str, BackendScheme] = {"http": "https", "https": "https", "grpc": "grpcs", "grpcs": "grpcs"}


@dataclass(frozen=True)
class ClientCertificate:
    """A Gateway's backend client certificate: certificate and key in one file of NginxPaths.ssl_dir."""
    file_name: str
    content: bytes


def backend_client_certificate(gateway_spec: Mapping[str, Any], *, namespace: str, grants: ReferenceGrants,
                               secrets: TlsSecrets) -> ClientCertificate | None:
    """spec.tls.backend.clientCertificateRef of a Gateway in `namespace`, None when it has none. Raises RouteRejected
    (reason InvalidClientCertificateRef or RefNotPermitted, in the message) when it cannot be used."""
    tls = gateway_spec.get("tls")
    backend = tls.get("backend") if isinstance(tls, dict) else None
    ref = backend.get("clientCertificateRef") if isinstance(backend, dict) else None
    if not isinstance(ref, dict):
        return None
    where = "spec.tls.backend.clientCertificateRef"
    group, kind, name = ref.get("group") or "", ref.get("kind") or "Secret", ref.get("name")
    if (group, kind) != ("", "Secret"):
        raise RouteRejected(f"{where}: {kind} of group {group!r} is not supported; name a TLS Secret (reason "
                            "InvalidClientCertificateRef)", reason=Reason.INVALID_CLIENT_CERTIFICATE_REF)
    secret_namespace = ref.get("namespace") or namespace
    if not grants.allows(source=(GATEWAY_GROUP, "Gateway", namespace),
                         target=("", "Secret", secret_namespace, str(name))):
        raise RouteRejected(f"{where}: Secret {secret_namespace}/{name} is in another namespace and no ReferenceGrant "
                            f"in {secret_namespace} allows it (reason RefNotPermitted)", reason=Reason.REF_NOT_PERMITTED)
    secret = f"{secret_namespace}/{name}"
    if problem := secrets.problem(secret):
        raise RouteRejected(f"{where}: Secret {secret} {problem}; it must be a TLS Secret with tls.crt and tls.key "
                            "(reason InvalidClientCertificateRef)", reason=Reason.INVALID_CLIENT_CERTIFICATE_REF)
    pems = secrets.pems(secret)
    content = (pems["cert"].rstrip("\n") + "\n" + pems["key"]).encode()
    return ClientCertificate(f"gateway-client-{hashlib.sha256(content).hexdigest()[:16]}.pem", content)


@dataclass
class UpstreamTls:
    """The policies, and the client certificate of each route ("Kind namespace/name") whose Gateways have one."""
    policies: BackendTlsPolicies = field(default_factory=BackendTlsPolicies)
    client_certificates: dict[str, ClientCertificate] = field(default_factory=dict)

    def policy(self, ref: ServiceRef, resolved: ResolvedBackend) -> PolicyVerdict | None:
        applied = self.policies.for_service(ref.namespace, ref.service, resolved.port_name)
        return applied.policy if applied is not None else None

    def signature(self, route: str, resolved: list[tuple[ServiceRef, ResolvedBackend]]) -> tuple[Any, ...]:
        """What a rule's TLS depends on beside its plan: a kept action with another signature is made again."""
        return (self.client_certificates.get(route),
                *(self.policy(ref, backend) for ref, backend in resolved if backend.name is not None))


def policy_refusal(ref: ServiceRef, policy: PolicyVerdict) -> str:
    """Why a backend whose policy is refused is not reached (the caller says what answers instead)."""
    return f"Service {ref.namespace}/{ref.service}: BackendTLSPolicy {policy.ref} is not accepted ({policy.accepted_message})"


@dataclass
class RuleTls:
    """The TLS of one rule's backends, collected as they are resolved (add), then its profile's settings."""
    upstream: UpstreamTls
    route: str  # "Kind namespace/name"
    chosen: PolicyVerdict | None = None
    seen: bool = False  # a backend was added: `chosen` is the rule's
    files: dict[str, bytes] = field(default_factory=dict)

    def add(self, ref: ServiceRef, resolved: ResolvedBackend) -> str | None:
        """Why this backend answers 500 (its policy is refused, or the rule's backends differ), None to serve it."""
        policy = self.upstream.policy(ref, resolved)
        if policy is not None and policy.tls is None:
            return f"{policy_refusal(ref, policy)}; its share of requests answers 500"
        if self.seen and policy != self.chosen:
            return (f"Service {ref.namespace}/{ref.service}: its BackendTLSPolicy differs from the rule's other "
                    "backends', and a rule verifies its backends one way; its share of requests answers 500: give it "
                    "a rule of its own")
        self.chosen, self.seen = policy, True
        return None

    def profile_settings(self, scheme: BackendScheme) -> dict[str, Any]:
        """The LocationProfile settings of the rule (none when its backends are not verified), noting its files."""
        policy = self.chosen
        if policy is None or policy.tls is None:
            return {}
        tls: BackendTls = policy.tls
        if tls.ca_file is not None:  # None: the system's CAs
            self.files[tls.ca_file] = policy.ca_pem
        certificate = self.upstream.client_certificates.get(self.route)
        if certificate is not None:
            tls = replace(tls, cert_file=certificate.file_name)
            self.files[certificate.file_name] = certificate.content
        return {"backend_scheme": _TLS_SCHEMES.get(scheme, scheme), "backend_tls": tls}


def upstream_tls(objects: GatewayObjects, attached: Iterable[tuple[RoutePlan, list[Attachment]]], *,
                 our_gateways: frozenset[str], grants: ReferenceGrants,
                 secrets: TlsSecrets) -> tuple[UpstreamTls, list[tuple[str, str]]]:
    """The store's policies, and each attached route's client certificate: that of the oldest of its Gateways
    (listeners.gateways_oldest_first) that has one; with (object, message) for each Gateway whose clientCertificateRef
    is unusable (its routes then show none)."""
    certificates: dict[str, ClientCertificate | None] = {}  # oldest Gateway first
    problems: list[tuple[str, str]] = []
    for (namespace, name), _ in gateways_oldest_first(objects.gateways):
        gateway = f"{namespace}/{name}"
        if gateway not in our_gateways:
            continue
        try:
            certificates[gateway] = backend_client_certificate(
                objects.gateways[namespace, name].get("spec") or {}, namespace=namespace, grants=grants,
                secrets=secrets)
        except RouteRejected as err:
            certificates[gateway] = None
            problems.append((f"Gateway {gateway}", f"{err}; no client certificate is shown to backends"))
    rank = {gateway: index for index, gateway in enumerate(certificates)}
    routes: dict[str, ClientCertificate] = {}
    for plan, attachments in attached:
        found = next((certificate for gateway in sorted({a.listener.gateway for a in attachments},
                                                        key=lambda gateway: (rank.get(gateway, len(rank)), gateway))
                      if (certificate := certificates.get(gateway)) is not None), None)
        if found is not None:
            routes[f"{plan.kind} {plan.ref}"] = found
    return UpstreamTls(BackendTlsPolicies.of(objects.tls_policies, objects.config_maps), routes), problems
