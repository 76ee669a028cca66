"""Manifest documents → the Kubernetes objects they define, or the reason each one is not accepted.

The checks are those `kubectl apply` and the API server would make before storing an object and that
matter to pyngress: an accepted kind at its served apiVersion, a valid name and namespace, string
labels and annotations (an unquoted `ssl-redirect: false` is a boolean, which kubectl rejects too),
and plain JSON values only. What passes is normalised as the API would store it: the namespace
defaults to "default" for namespaced kinds, is dropped for cluster-scoped ones, and a given
creationTimestamp is rewritten in the API's UTC form.
"""
from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass
from datetime import datetime, timezone
from typing import Any

from services.common.objects import CLUSTER_SCOPED
from services.watcher.manifest_parser import Document

GATEWAY_API_V1 = "gateway.networking.k8s.io/v1"
# kind → the apiVersion the API serves it at (the one pyngress reads, with OLDER_VERSIONS).
ACCEPTED_KINDS: dict[str, str] = {
    "Ingress": "networking.k8s.io/v1",
    "IngressClass": "networking.k8s.io/v1",
    "Service": "v1",
    "EndpointSlice": "discovery.k8s.io/v1",
    "Secret": "v1",
    "ConfigMap": "v1",
    "Node": "v1",
    "Namespace": "v1",  # its labels, for --watch-namespace-selector
    # Gateway API (docs/gateway-api.md)
    "GatewayClass": GATEWAY_API_V1,
    "Gateway": GATEWAY_API_V1,
    "HTTPRoute": GATEWAY_API_V1,
    "GRPCRoute": GATEWAY_API_V1,
    "TLSRoute": GATEWAY_API_V1,
    "ReferenceGrant": GATEWAY_API_V1,
    "BackendTLSPolicy": GATEWAY_API_V1,
}
# kind → older apiVersions still read as they are (a CRD serves the same schema at both).
OLDER_VERSIONS: dict[str, tuple[str, ...]] = {
    "ReferenceGrant": ("gateway.networking.k8s.io/v1beta1",),
    "TLSRoute": ("gateway.networking.k8s.io/v1alpha2",),  # the experimental channel's, before v1
    "BackendTLSPolicy": ("gateway.networking.k8s.io/v1alpha3",),  # the experimental channel's, before v1
}
DEFAULT_NAMESPACE = "default"

# RFC 1123 subdomain (object names) and label (namespaces), as the API validates them.
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class Problem:
    """Something wrong in a manifest file, located as precisely as known (1-based; 0 = unknown)."""
    file: str
    _: KW_ONLY
    message: str
    line: int = 0
    document: int = 0
    item: int = 0

    def __str__(self) -> str:
        where = [f"{self.file}:{self.line}" if self.line else self.file]
        if self.document:
            where.append(f"document {self.document}" + (f" item {self.item}" if self.item else ""))
        return f"{', '.join(where)}: {self.message}"


class _Rejected(ValueError):
    pass


def _accepted_kinds_text() -> str:
    return ", ".join(f"{kind} ({version})" for kind, version in ACCEPTED_KINDS.items())


_SCALARS = (str, int, float, bool, type(None))


def _json_values_only(value: Any) -> bool:
    """Whether `value` holds JSON values only (string keys; str, number, bool, null, lists, mappings)."""
    kind = type(value)
    if kind is dict:
        return all(type(key) is str and _json_values_only(item) for key, item in value.items())
    if kind is list:
        return all(_json_values_only(item) for item in value)
    return isinstance(value, _SCALARS)


def _check_json_values(value: Any, path: str) -> None:
    """Objects travel as msgpack and the syncer reads them as the API gives them: JSON values only. (The walk
    that names the offending path runs only when there is one: building every path cost a third of a scan.)"""
    if _json_values_only(value):
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Rejected(f"key {key!r} under {path or 'the top level'} is not a string; quote it")
            _check_json_values(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_json_values(item, f"{path}[{i}]")
    elif not isinstance(value, _SCALARS):
        raise _Rejected(f"{path} is a YAML {type(value).__name__}, which Kubernetes objects cannot hold; "
                        "write it as a string")


def _check_string_map(meta: dict[str, Any], field: str) -> None:
    values = meta.get(field)
    if values is None:
        return
    if not isinstance(values, dict):
        raise _Rejected(f"metadata.{field} must be a mapping of strings")
    for key, value in values.items():
        if not isinstance(value, str):
            shown = str(value).lower() if isinstance(value, bool) else value
            raise _Rejected(f'metadata.{field}["{key}"] must be a string; quote the value: "{shown}"')


def _normalised_timestamp(value: Any) -> str:
    if not isinstance(value, str):
        raise _Rejected(f"metadata.creationTimestamp must be an RFC 3339 string, got {value!r}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise _Rejected(f"metadata.creationTimestamp {value!r} is not RFC 3339 "
                        "(e.g. 2024-01-31T12:00:00Z)") from None
    if moment.tzinfo is None:
        raise _Rejected(f"metadata.creationTimestamp {value!r} lacks a time zone; add Z for UTC")
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _checked_object(data: Any, *, json_values: bool = False) -> dict[str, Any]:
    """`data` as an accepted object, normalised; raises _Rejected saying what to change. `json_values`: the
    reader guarantees JSON values only."""
    if not isinstance(data, dict):
        raise _Rejected(f"a {type(data).__name__} is not a Kubernetes object (expected a mapping)")
    kind, api_version = data.get("kind"), data.get("apiVersion")
    if not isinstance(kind, str) or not kind:
        raise _Rejected("kind is missing")
    if not isinstance(api_version, str) or not api_version:
        raise _Rejected("apiVersion is missing")
    if kind not in ACCEPTED_KINDS:
        raise _Rejected(f"kind {kind} is not read by pyngress; accepted kinds: {_accepted_kinds_text()}")
    if api_version != ACCEPTED_KINDS[kind] and api_version not in OLDER_VERSIONS.get(kind, ()):
        raise _Rejected(f"{kind} apiVersion {api_version} is not served; use {ACCEPTED_KINDS[kind]}")
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        raise _Rejected("metadata is missing")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise _Rejected("metadata.name is missing" + (" (generateName needs an API server)"
                                                       if "generateName" in meta else ""))
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        raise _Rejected(f"metadata.name {name!r} is not a valid name: lower-case letters, digits, '-' and "
                        "'.', starting and ending with a letter or digit, at most 253 characters")
    if not json_values:
        _check_json_values(data, "")
    _check_string_map(meta, "labels")
    _check_string_map(meta, "annotations")
    for field in ("uid", "resourceVersion"):
        if field in meta and not isinstance(meta[field], str):
            raise _Rejected(f"metadata.{field} must be a string")
    if "generation" in meta and (not isinstance(meta["generation"], int) or isinstance(meta["generation"], bool)):
        raise _Rejected("metadata.generation must be an integer")

    meta = dict(meta)
    if kind in CLUSTER_SCOPED:
        meta.pop("namespace", None)
    else:
        namespace = meta.get("namespace") or DEFAULT_NAMESPACE
        if not isinstance(namespace, str) or len(namespace) > 63 or not _LABEL.fullmatch(namespace):
            raise _Rejected(f"metadata.namespace {namespace!r} is not a valid namespace: lower-case letters, "
                            "digits and '-', starting and ending with a letter or digit, at most 63 characters")
        meta["namespace"] = namespace
    if "creationTimestamp" in meta:
        if meta["creationTimestamp"] is None:
            del meta["creationTimestamp"]  # `kubectl get -o yaml --dry-run` writes `creationTimestamp: null`
        else:
            meta["creationTimestamp"] = _normalised_timestamp(meta["creationTimestamp"])
    return {**data, "metadata": meta}


def _is_list(data: Any) -> bool:
    """`kind: List`, or a typed list such as `IngressList` as `kubectl get -o yaml` prints it."""
    return (isinstance(data, dict) and isinstance(data.get("kind"), str) and data["kind"].endswith("List")
            and "items" in data)


def objects_of(document: Document, file: str) -> tuple[list[dict[str, Any]], list[Problem]]:
    """The accepted objects a document defines, and a Problem for each part that is skipped."""
    if not _is_list(document.data):
        try:
            return [_checked_object(document.data, json_values=document.json_values)], []
        except _Rejected as err:
            return [], [Problem(file, message=f"{err}; document skipped", line=document.line,
                                document=document.index)]
    items = document.data["items"]
    if not isinstance(items, list):
        return [], [Problem(file, message="items of a List must be a sequence; document skipped",
                            line=document.line, document=document.index)]
    objects, problems = [], []
    for i, item in enumerate(items):
        try:
            objects.append(_checked_object(item, json_values=document.json_values))
        except _Rejected as err:
            line = document.item_lines[i] if i < len(document.item_lines) else document.line
            problems.append(Problem(file, message=f"{err}; item skipped", line=line, document=document.index,
                                    item=i + 1))
    return objects, problems
