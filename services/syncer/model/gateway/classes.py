"""Which GatewayClasses are ours: those whose spec.controllerName is --gateway-controller-name."""
from __future__ import annotations

from typing import Any, Mapping


def our_classes(classes: Mapping[str, Mapping[str, Any]], controller_name: str) -> frozenset[str]:
    """The names of the GatewayClasses this controller serves."""
    return frozenset(name for name, obj in classes.items()
                     if (obj.get("spec") or {}).get("controllerName") == controller_name)
