"""What the status says of TLS on both sides of a Gateway's routes (status.py writes it as conditions).

- A Gateway: InsecureFrontendValidationMode (True, ConfigurationChanged) while its spec.tls.frontend lets requests
  through without a valid client certificate (client_validation.py), and ResolvedRefs for its
  spec.tls.backend.clientCertificateRef when it has one (upstream_tls.py); the Gateway stays accepted either way.
- A BackendTLSPolicy: one status.ancestors entry per Gateway of ours whose routes name a Service it targets, with
  Accepted (Accepted, or Conflicted, NoValidCACertificate, Invalid) and ResolvedRefs (backend_tls_policies.py).
"""
from __future__ import annotations

from typing import Any, Mapping

from ..tls import TlsSecrets
from .backend_tls_policies import ACCEPTED, CONFLICTED, RESOLVED_REFS, BackendTlsPolicies, PolicyVerdict
from .client_validation import insecure_fallback_ports
from .fields import RouteRejected
from .objects import GATEWAY_GROUP, GatewayObjects
from .reasons import Reason
from .reference_grants import ReferenceGrants
from .upstream_tls import backend_client_certificate

ConditionSpec = tuple[str, bool, str, str]  # (type, status, reason, message)


def gateway_tls_conditions(gateway: Mapping[str, Any], *, namespace: str, grants: ReferenceGrants,
                           secrets: TlsSecrets) -> list[ConditionSpec]:
    """The Gateway's conditions about its frontend validation mode and its backend client certificate."""
    spec = gateway.get("spec") or {}
    found: list[ConditionSpec] = []
    if insecure := insecure_fallback_ports(spec):
        found.append(("InsecureFrontendValidationMode", True, "ConfigurationChanged",
                      f"spec.tls.frontend ({', '.join(insecure)}) is in AllowInsecureFallback mode: requests without a "
                      "valid client certificate are served"))
    try:
        if backend_client_certificate(spec, namespace=namespace, grants=grants, secrets=secrets) is not None:
            found.append(("ResolvedRefs", True, "ResolvedRefs", "spec.tls.backend.clientCertificateRef resolves"))
    except RouteRejected as err:
        found.append(("ResolvedRefs", False, str(err.reason or Reason.INVALID_CLIENT_CERTIFICATE_REF), str(err)))
    return found


def policy_statuses(objects: GatewayObjects, *, ours: frozenset[str]
                    ) -> dict[tuple[str, str], tuple[list[dict[str, str]], list[ConditionSpec]]]:
    """(ancestorRefs, conditions) of each BackendTLSPolicy that targets a Service the routes of our Gateways name."""
    if not objects.tls_policies:
        return {}
    users = _gateways_by_service(objects, ours)
    policies = BackendTlsPolicies.of(objects.tls_policies, objects.config_maps)
    found = {}
    for key, verdict in policies.verdicts.items():
        gateways = sorted({gateway for service, _ in verdict.targets for gateway in users.get((key[0], service), ())})
        if gateways:
            ancestors = [{"group": GATEWAY_GROUP, "kind": "Gateway", "namespace": gateway.partition("/")[0],
                          "name": gateway.partition("/")[2]} for gateway in gateways]
            found[key] = (ancestors, _conditions(verdict, policies))
    return found


def _conditions(verdict: PolicyVerdict, policies: BackendTlsPolicies) -> list[ConditionSpec]:
    winner = next((applied.policy for service, section in verdict.targets
                   if (applied := policies.for_service(verdict.namespace, service, section)) is not None
                   and verdict in applied.conflicted), None)
    if winner is not None:
        accepted: ConditionSpec = ("Accepted", False, CONFLICTED, f"BackendTLSPolicy {winner.ref} targets the same "
                                   "Service (and port) and is older; this one does not apply")
    else:
        accepted = ("Accepted", verdict.accepted_reason == ACCEPTED, verdict.accepted_reason, verdict.accepted_message)
    resolved = ("ResolvedRefs", verdict.resolved_reason == RESOLVED_REFS, verdict.resolved_reason,
                verdict.resolved_message)
    return [accepted, resolved]


def _gateways_by_service(objects: GatewayObjects, ours: frozenset[str]) -> dict[tuple[str, str], set[str]]:
    """(namespace, Service) → our Gateways ("namespace/name") whose HTTPRoutes, GRPCRoutes or TLSRoutes name it."""
    found: dict[tuple[str, str], set[str]] = {}
    for routes in (objects.routes, objects.grpc_routes, objects.tls_routes):
        for (namespace, _), route in routes.items():
            spec = route.get("spec") or {}
            parents = {f"{p.get('namespace') or namespace}/{p.get('name')}" for p in _dicts(spec.get("parentRefs"))
                       if (p.get("group") or GATEWAY_GROUP, p.get("kind") or "Gateway") == (GATEWAY_GROUP, "Gateway")}
            parents &= ours
            if not parents:
                continue
            for rule in _dicts(spec.get("rules")):
                for ref in _dicts(rule.get("backendRefs")):
                    if (ref.get("group") or "", ref.get("kind") or "Service") == ("", "Service"):
                        found.setdefault((ref.get("namespace") or namespace, str(ref.get("name"))), set()).update(
                            parents)
    return found


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []
