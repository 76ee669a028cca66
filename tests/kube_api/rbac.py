"""RBAC as the real API server evaluates it, over the Roles, ClusterRoles and bindings the server stores.

A request's attributes are read from its URL the way the API server's RequestInfo does it (verb from the
method, namespace/resource/name/subresource from the path, a list or watch narrowed by
`fieldSelector=metadata.name=X` counts as naming X). A request is allowed when some rule reachable from a
binding whose subjects include the user matches it:
- ClusterRoleBindings grant their ClusterRole's rules everywhere: in every namespace, across all
  namespaces, and for cluster-scoped resources;
- RoleBindings grant their Role's (or ClusterRole's) rules only for requests in the binding's namespace;
- a rule matches when its verbs, apiGroups and resources hold the request's ("*" matches anything; a
  subresource is matched only as "resource/subresource" or "*/subresource"; "*" matches those too) and,
  when it has resourceNames, the request names one of them (a create or an unnarrowed list names none);
- subjects: a User by name, a Group by any of the user's groups, a ServiceAccount by namespace (a
  RoleBinding's own when left out) and name.
A binding whose role does not exist grants nothing. Non-resource paths: /version for everyone, the
discovery paths (/api, /apis, ...) for authenticated users (system:public-info-viewer and
system:discovery). Not implemented: aggregated ClusterRoles, nonResourceURLs rules, escalation checks on
writes to RBAC objects, impersonation. An open watch is not cut when a permission is removed (the real
server does not either): authorization happens when a request starts.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from . import errors
from .auth import UserInfo, service_account_username
from .errors import ApiError
from .resources import ResourceType, by_kind

GROUP = "rbac.authorization.k8s.io"
_NAMESPACE_SUBRESOURCES = ("status", "finalize")
_VERB_BY_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True)
class Attributes:
    """What a request asks to do, in the terms RBAC rules use."""
    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""             # for a non-resource request
    is_resource: bool = True


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of a request, read from its method, path and query as the API server's RequestInfo."""
    segments = [s for s in path.split("/") if s]
    if segments[:1] == ["api"] and len(segments) >= 2:
        group, parts = "", segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        group, parts = segments[1], segments[3:]
    else:
        parts = []
    if not parts:
        return Attributes(verb="get" if method in ("GET", "HEAD") else method.lower(), path=path, is_resource=False)
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    resource = parts[0]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 else ""
    watching = query.get("watch", "").lower() in ("1", "true")
    if method in ("GET", "HEAD"):
        verb = ("watch" if watching else "get") if name else ("watch" if watching else "list")
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERB_BY_METHOD.get(method, method.lower())
    if not name and verb in ("list", "watch"):
        name = _name_from_field_selector(query.get("fieldSelector", ""))
    return Attributes(verb=verb, api_group=group, resource=resource, subresource=subresource,
                      namespace=namespace, name=name, path=path)


def _name_from_field_selector(selector: str) -> str:
    """X when the selector requires metadata.name=X (or ==X) exactly."""
    for term in selector.split(","):
        key, op, value = term.partition("==") if "==" in term else term.partition("=")
        if op and key.strip() == "metadata.name" and not key.endswith("!"):
            return value.strip()
    return ""


# --- evaluation ---

def rule_matches(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.api_group not in groups:
        return False
    combined = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if not any(r == "*" or r == combined or (attrs.subresource and r == f"*/{attrs.subresource}")
               for r in rule.get("resources") or []):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def subject_matches(subject: Mapping[str, Any], user: UserInfo, binding_namespace: str) -> bool:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.name == service_account_username(namespace, name or "")
    return False


class Authorizer:
    """Evaluates requests against the RBAC objects in `objects` (the storage's, by type; read live)."""

    def __init__(self, objects: Mapping[ResourceType, Mapping[tuple[str, str], dict[str, Any]]]) -> None:
        self._objects = objects
        self._types = {kind: by_kind(kind) for kind in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")}

    def _rules(self, kind: str, namespace: str, name: str) -> list[dict[str, Any]]:
        role = self._objects[self._types[kind]].get((namespace if kind == "Role" else "", name))
        return list((role or {}).get("rules") or [])

    def _granted_rules(self, user: UserInfo, namespace: str) -> Iterable[dict[str, Any]]:
        for binding in self._objects[self._types["ClusterRoleBinding"]].values():
            ref = binding.get("roleRef") or {}
            if ref.get("kind") == "ClusterRole" and _applies(binding, user, ""):
                yield from self._rules("ClusterRole", "", ref.get("name", ""))
        if not namespace:
            return
        for (binding_namespace, _), binding in self._objects[self._types["RoleBinding"]].items():
            ref = binding.get("roleRef") or {}
            if binding_namespace == namespace and ref.get("kind") in ("Role", "ClusterRole") \
                    and _applies(binding, user, namespace):
                yield from self._rules(ref["kind"], namespace, ref.get("name", ""))

    def allowed(self, user: UserInfo, attrs: Attributes) -> bool:
        if user.is_admin:
            return True
        if not attrs.is_resource:
            public = [s for s in attrs.path.split("/") if s] == ["version"]
            return public or (user.authenticated and _is_discovery(attrs.path))
        return any(rule_matches(rule, attrs) for rule in self._granted_rules(user, attrs.namespace))

    def check(self, user: UserInfo, attrs: Attributes) -> None:
        """Raise the real server's 403 Forbidden when `user` may not do `attrs`."""
        if not self.allowed(user, attrs):
            raise forbidden(user, attrs)


def _applies(binding: Mapping[str, Any], user: UserInfo, namespace: str) -> bool:
    return any(subject_matches(s, user, namespace) for s in binding.get("subjects") or [] if isinstance(s, dict))


def _is_discovery(path: str) -> bool:
    segments = [s for s in path.split("/") if s]
    return (segments[:1] in (["api"], ["apis"]) and len(segments) <= 3) or segments == ["openapi", "v2"]


def forbidden(user: UserInfo, attrs: Attributes) -> ApiError:
    """403 with the real API server's message (its forbiddenMessage and NewForbidden)."""
    if not attrs.is_resource:
        return ApiError(403, "Forbidden", f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"',
                        {})
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = (f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope")
    why = (f'User "{user.name}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
           f"{where}")
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    details: dict[str, Any] = {"kind": attrs.resource}
    if attrs.name:
        details = {"name": attrs.name, **({"group": attrs.api_group} if attrs.api_group else {}), **details}
    elif attrs.api_group:
        details = {"group": attrs.api_group, **details}
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    return ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)


# --- validation of the RBAC objects themselves ---

def validate(rtype: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
    """What the real server refuses in a binding: a roleRef it cannot follow, or a changed roleRef."""
    if rtype.kind not in ("RoleBinding", "ClusterRoleBinding"):
        return
    name = obj["metadata"].get("name", "")
    ref = obj.get("roleRef")
    kinds = ("ClusterRole",) if rtype.kind == "ClusterRoleBinding" else ("Role", "ClusterRole")
    if not isinstance(ref, dict) or ref.get("apiGroup") != GROUP or ref.get("kind") not in kinds \
            or not ref.get("name"):
        raise errors.invalid(rtype, name, "roleRef", json_text(ref),
                             f"roleRef must name a {' or '.join(kinds)} of apiGroup {GROUP}")
    if old is not None and old.get("roleRef") != ref:
        raise errors.invalid(rtype, name, "roleRef", json_text(ref), "cannot change roleRef")
    for index, subject in enumerate(obj.get("subjects") or []):
        kind = subject.get("kind") if isinstance(subject, dict) else None
        if kind not in ("User", "Group", "ServiceAccount") or not subject.get("name"):
            raise errors.invalid(rtype, name, f"subjects[{index}]", json_text(subject),
                                 "a subject is a User, Group or ServiceAccount with a name")
        if kind == "ServiceAccount" and rtype.kind == "ClusterRoleBinding" and not subject.get("namespace"):
            raise errors.invalid(rtype, name, f"subjects[{index}].namespace", "", "Required value")


def json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
