"""Which Ingresses are ours, decided the way ingress-nginx decides it.

1. `spec.ingressClassName` set: ours when it names an IngressClass whose `spec.controller` is our
   --controller-class (a missing class, or another controller's, is not ours); with --ingress-class-by-name,
   also the IngressClass named --ingress-class, whatever its controller (as ingress-nginx's store takes it).
2. Else the legacy annotation `kubernetes.io/ingress.class` set: ours when it equals --ingress-class.
3. Else (no class at all): ours with --watch-ingress-without-class, or when one of our IngressClasses is
   annotated `ingressclass.kubernetes.io/is-default-class: "true"`. The latter mirrors Kubernetes'
   admission, which gives a classless Ingress the default class; manifests never pass through it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from services.common.settings import Settings

LEGACY_CLASS_ANNOTATION = "kubernetes.io/ingress.class"
DEFAULT_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"


@dataclass(frozen=True, kw_only=True)
class IngressClassFilter:
    our_classes: frozenset[str]  # names of the IngressClasses whose controller is ours
    legacy_class: str  # the `kubernetes.io/ingress.class` value that is ours
    take_classless: bool

    @classmethod
    def from_classes(cls, ingress_classes: Iterable[dict[str, Any]], settings: Settings) -> IngressClassFilter:
        by_name = settings.ingress.ingress_class if settings.ingress.ingress_class_by_name else None
        ours = [c for c in ingress_classes if (c.get("spec") or {}).get("controller") == settings.ingress.controller_class
                or (c.get("metadata") or {}).get("name") == by_name]
        default_is_ours = any(
            ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true" for c in ours
        )
        return cls(
            our_classes=frozenset(c["metadata"]["name"] for c in ours),
            legacy_class=settings.ingress.ingress_class,
            take_classless=settings.ingress.watch_ingress_without_class or default_is_ours,
        )

    def is_ours(self, ingress: dict[str, Any]) -> bool:
        """Whether the Ingress is ours. A hand-written manifest may have any shape: one whose class fields
        are not strings is not ours (the model reports its spec when it is)."""
        spec = ingress.get("spec")
        class_name = spec.get("ingressClassName") if isinstance(spec, dict) else None
        if class_name:
            return isinstance(class_name, str) and class_name in self.our_classes
        annotations = (ingress.get("metadata") or {}).get("annotations")
        legacy = annotations.get(LEGACY_CLASS_ANNOTATION) if isinstance(annotations, dict) else None
        if legacy:
            return legacy == self.legacy_class
        return self.take_classless
