"""The resource types the test API server serves, and what the real API server says about each."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

GATEWAY_API = "gateway.networking.k8s.io"
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
STATUS_VERBS = ("get", "patch", "update")

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


def dns1123_label_error(name: str) -> str | None:
    if len(name) > 63 or not _DNS1123_LABEL.fullmatch(name):
        return ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
                "and must start and end with an alphanumeric character (at most 63 characters)")
    return None


def dns1123_subdomain_error(name: str) -> str | None:
    if len(name) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(name):
        return ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (at most 253 characters)")
    return None


def dns1035_label_error(name: str) -> str | None:
    if len(name) > 63 or not _DNS1035_LABEL.fullmatch(name):
        return ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (at most 63 characters)")
    return None


def path_segment_error(name: str) -> str | None:
    """RBAC object names need only be usable in a URL path (ClusterRoles such as "system:discovery")."""
    if name in (".", "..") or "/" in name or "%" in name:
        return 'may not be "." or "..", and may not contain "/" or "%"'
    return None


@dataclass(frozen=True)
class ResourceType:
    group: str          # "" for the core group
    version: str
    kind: str
    plural: str
    namespaced: bool
    # Kinds with a status subresource: the main resource ignores status changes, /status ignores the rest.
    has_status: bool = False
    name_rule: str = "subdomain"  # "subdomain", "label" (RFC 1123), "dns1035" or "path" (RBAC: "system:x")
    short_names: tuple[str, ...] = ()
    # Subresources besides status, each served by its own handler (ServiceAccount: "token").
    extra_subresources: tuple[str, ...] = ()
    # A CustomResourceDefinition's kind (Gateway API): no strategic merge patch, list items keep their kind,
    # validated by crd_schemas.py.
    custom: bool = False
    # Older versions served from the same storage (`version` is the storage version): a CRD with several
    # versions and no conversion webhook, whose objects differ only in apiVersion.
    other_versions: tuple[str, ...] = ()

    @property
    def subresources(self) -> tuple[str, ...]:
        return (("status",) if self.has_status else ()) + self.extra_subresources

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def versions(self) -> tuple[str, ...]:
        return (self.version, *self.other_versions)

    def api_version_at(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    @property
    def qualified(self) -> str:
        """How error messages name the resource: "ingresses.networking.k8s.io", "services"."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def name_error(self, name: str) -> str | None:
        check = {"subdomain": dns1123_subdomain_error, "label": dns1123_label_error,
                 "dns1035": dns1035_label_error, "path": path_segment_error}[self.name_rule]
        return check(name)


RESOURCE_TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "Namespace", "namespaces", False, has_status=True, name_rule="label", short_names=("ns",)),
    ResourceType("", "v1", "Node", "nodes", False, has_status=True, short_names=("no",)),
    ResourceType("", "v1", "Service", "services", True, has_status=True, name_rule="dns1035", short_names=("svc",)),
    ResourceType("", "v1", "Secret", "secrets", True),
    ResourceType("", "v1", "ConfigMap", "configmaps", True, short_names=("cm",)),
    ResourceType("", "v1", "Event", "events", True, short_names=("ev",)),
    ResourceType("networking.k8s.io", "v1", "Ingress", "ingresses", True, has_status=True, short_names=("ing",)),
    ResourceType("networking.k8s.io", "v1", "IngressClass", "ingressclasses", False),
    ResourceType("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, short_names=("sa",),
                 extra_subresources=("token",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False, name_rule="path"),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False,
                 name_rule="path"),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True, name_rule="path"),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True, name_rule="path"),
    ResourceType("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
                 "validatingwebhookconfigurations", False),
    # Gateway API (its standard CRDs, and TLSRoute of the experimental ones)
    ResourceType(GATEWAY_API, "v1", "GatewayClass", "gatewayclasses", False, has_status=True, custom=True,
                 short_names=("gc",)),
    ResourceType(GATEWAY_API, "v1", "Gateway", "gateways", True, has_status=True, custom=True, short_names=("gtw",)),
    ResourceType(GATEWAY_API, "v1", "HTTPRoute", "httproutes", True, has_status=True, custom=True),
    ResourceType(GATEWAY_API, "v1", "GRPCRoute", "grpcroutes", True, has_status=True, custom=True),
    ResourceType(GATEWAY_API, "v1", "ReferenceGrant", "referencegrants", True, custom=True, short_names=("refgrant",),
                 other_versions=("v1beta1",)),
    ResourceType(GATEWAY_API, "v1", "TLSRoute", "tlsroutes", True, has_status=True, custom=True,
                 other_versions=("v1alpha2",)),
    ResourceType(GATEWAY_API, "v1", "BackendTLSPolicy", "backendtlspolicies", True, has_status=True, custom=True,
                 short_names=("btlspolicy",), other_versions=("v1alpha3",)),
)
# The verbs of each subresource, for discovery.
SUBRESOURCE_VERBS = {"status": STATUS_VERBS, "token": ("create",)}


def find(group: str, version: str, plural: str, served: Sequence[ResourceType] = RESOURCE_TYPES) -> ResourceType | None:
    for rtype in served:
        if (rtype.group, rtype.plural) == (group, plural) and version in rtype.versions:
            return rtype
    return None


def by_kind(kind: str) -> ResourceType:
    for rtype in RESOURCE_TYPES:
        if rtype.kind == kind:
            return rtype
    raise KeyError(f"the test API server does not serve kind {kind!r}")


def group_versions(served: Sequence[ResourceType] = RESOURCE_TYPES) -> dict[str, list[str]]:
    """Every API group (core excluded) and its versions, in the order the server lists them."""
    groups: dict[str, list[str]] = {}
    for rtype in served:
        for version in rtype.versions if rtype.group else ():
            if version not in groups.setdefault(rtype.group, []):
                groups[rtype.group].append(version)
    return groups
