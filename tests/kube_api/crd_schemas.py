"""What the Gateway API CRDs' schemas make the API server refuse or fill in, as far as clients rely on it.

Kept small: the required fields (and the list bounds) of each kind, the unique listener names of a Gateway, and
the "Waiting for controller" status a new GatewayClass and Gateway get from their schemas' defaults. Messages
are the API server's: `HTTPRoute.gateway.networking.k8s.io "name" is invalid: spec.parentRefs[0].name: Required
value`.
"""
from __future__ import annotations

from typing import Any

from . import errors
from .resources import ResourceType

# kind → (path, min items, max items) of the lists whose entries are checked, and each entry's required fields.
# A path ending in "[]" names each entry of a list; "" is the object itself.
_REQUIRED: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "GatewayClass": (("", ("spec",)), ("spec", ("controllerName",))),
    "Gateway": (("", ("spec",)), ("spec", ("gatewayClassName", "listeners")),
                ("spec.listeners[]", ("name", "port", "protocol"))),
    "HTTPRoute": (("", ("spec",)), ("spec.parentRefs[]", ("name",)), ("spec.rules[].backendRefs[]", ("name",))),
    "GRPCRoute": (("", ("spec",)), ("spec.parentRefs[]", ("name",)), ("spec.rules[].backendRefs[]", ("name",))),
    "ReferenceGrant": (("", ("spec",)), ("spec", ("from", "to")), ("spec.from[]", ("group", "kind", "namespace")),
                       ("spec.to[]", ("group", "kind"))),
    "TLSRoute": (("", ("spec",)), ("spec", ("rules",)), ("spec.parentRefs[]", ("name",)),
                 ("spec.rules[].backendRefs[]", ("name",))),
    "BackendTLSPolicy": (("", ("spec",)), ("spec", ("targetRefs", "validation")),
                         ("spec.targetRefs[]", ("group", "kind", "name")), ("spec.validation", ("hostname",))),
}
_BOUNDS: dict[str, tuple[tuple[str, int, int], ...]] = {
    "Gateway": (("spec.listeners", 1, 64),),
    "HTTPRoute": (("spec.parentRefs", 0, 32), ("spec.rules", 0, 16)),
    "GRPCRoute": (("spec.parentRefs", 0, 32), ("spec.rules", 0, 16)),
    "ReferenceGrant": (("spec.from", 1, 16), ("spec.to", 1, 16)),
    "TLSRoute": (("spec.parentRefs", 0, 32), ("spec.rules", 1, 16)),
    "BackendTLSPolicy": (("spec.targetRefs", 1, 16), ("spec.validation.caCertificateRefs", 0, 8)),
}
_PENDING = {"status": "Unknown", "reason": "Pending", "message": "Waiting for controller",
            "lastTransitionTime": "1970-01-01T00:00:00Z"}


def _at(obj: Any, path: str) -> list[tuple[str, Any]]:
    """Every value at `path` ("spec.rules[].backendRefs[]"), each with its field path ("spec.rules[0]...")."""
    found: list[tuple[str, Any]] = [("", obj)]
    for part in path.split(".") if path else []:
        name, each = part.removesuffix("[]"), part.endswith("[]")
        step = []
        for where, value in found:
            child = value.get(name) if isinstance(value, dict) else None
            here = f"{where}.{name}" if where else name
            if each:
                step += [(f"{here}[{i}]", item) for i, item in enumerate(child if isinstance(child, list) else [])]
            elif child is not None:
                step.append((here, child))
        found = step
    return found


def _required(rtype: ResourceType, name: str, field: str) -> errors.ApiError:
    details = {"name": name, "group": rtype.group, "kind": rtype.kind,
               "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": field}]}
    return errors.ApiError(422, "Invalid", f'{rtype.kind}.{rtype.group} "{name}" is invalid: {field}: Required value',
                           details)


def validate(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """Raise the API server's 422 for a Gateway API object its CRD's schema refuses."""
    if not rtype.custom:
        return
    name = obj["metadata"].get("name", "")
    for path, fields in _REQUIRED.get(rtype.kind, ()):
        for where, value in _at(obj, path):
            for field in fields:
                if not isinstance(value, dict) or value.get(field) is None:  # "" is a value (the core group)
                    raise _required(rtype, name, f"{where}.{field}" if where else field)
    for path, least, most in _BOUNDS.get(rtype.kind, ()):
        for where, value in _at(obj, path):
            count = len(value) if isinstance(value, list) else 0
            if not least <= count <= most:
                raise errors.invalid(rtype, name, where, count, f"must have between {least} and {most} items")
    if rtype.kind == "Gateway":
        names = [listener.get("name") for listener in obj["spec"]["listeners"] if isinstance(listener, dict)]
        if len(names) != len(set(names)):
            raise errors.invalid(rtype, name, "spec.listeners", names, "Listener name must be unique within the Gateway")


def status_on_create(rtype: ResourceType, obj: dict[str, Any]) -> None:
    """A new object's status: what its schema defaults, never what the client sent (the status subresource is
    the only way to write it)."""
    obj.pop("status", None)
    if rtype.kind == "GatewayClass":
        obj["status"] = {"conditions": [{"type": "Accepted", **_PENDING}]}
    elif rtype.kind == "Gateway":
        obj["status"] = {"conditions": [{"type": "Accepted", **_PENDING}, {"type": "Programmed", **_PENDING}]}
