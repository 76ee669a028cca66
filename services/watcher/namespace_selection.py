"""--watch-namespace-selector: the store gets the Ingresses of the namespaces whose labels match, only.

As in ingress-nginx, only Ingresses are narrowed: the Services, EndpointSlices, Secrets and ConfigMaps they
name are kept wherever they are (an Ingress of a selected namespace may name a Secret of another one). An
Ingress whose namespace is not known (yet) is held back, as ingress-nginx ignores it.

Unlike ingress-nginx, which notices a namespace's new labels only at its next resync of the Ingress, a change
of labels takes effect at once: the namespace's Ingresses appear in the store or leave it. For that every
Ingress is remembered here, published or held back. The Namespace objects are published too: the admission
webhook reads their labels to leave alone the Ingresses of namespaces the controller does not serve, and the
Gateway API's allowedRoutes namespace selectors match them.
"""
from __future__ import annotations

import logging
from typing import Any, Iterable

from services.common.label_selector import LabelSelector
from services.common.logs import kv
from services.common.objects import split_key
from services.watcher.source import StoreWriter

log = logging.getLogger(__name__)


class NamespaceSelection:
    """A StoreWriter in front of the store: passes everything on but the Ingresses of the namespaces the selector
    does not match."""

    def __init__(self, store: StoreWriter, selector: LabelSelector) -> None:
        self._store = store
        self._selector = selector
        self._selected: set[str] = set()  # namespaces whose labels match
        self._ingresses: dict[str, dict[str, Any]] = {}  # namespace → {key: Ingress as stored}, published or not

    def selects(self, namespace: str) -> bool:
        return namespace in self._selected

    async def set_many(self, changes: Iterable[tuple[str, Any]]) -> None:
        passed: list[tuple[str, Any]] = []
        for key, obj in changes:
            kind, namespace, name = split_key(key)
            if kind == "Namespace":
                passed += [*self._namespace_changed(name, obj), (key, obj)]
            elif kind == "Ingress":
                passed.append((key, self._ingress_changed(key, namespace, obj)))
            else:
                passed.append((key, obj))
        await self._store.set_many(passed)

    def _ingress_changed(self, key: str, namespace: str, ingress: Any) -> Any:
        """Remember the Ingress; what the store gets for it (None: nothing, it is held back or gone)."""
        ingresses = self._ingresses.setdefault(namespace, {})
        if ingress is None:
            ingresses.pop(key, None)
        else:
            ingresses[key] = ingress
        return ingress if self.selects(namespace) else None

    def _namespace_changed(self, name: str, namespace: Any) -> list[tuple[str, Any]]:
        """The store changes a namespace's new labels (or its deletion) make: its Ingresses come or go."""
        labels = ((namespace or {}).get("metadata") or {}).get("labels") if namespace is not None else None
        selected = namespace is not None and self._selector.matches(labels if isinstance(labels, dict) else {})
        if selected == self.selects(name):
            return []
        ingresses = self._ingresses.get(name, {})
        if selected:
            self._selected.add(name)
        else:
            self._selected.discard(name)
        log.info("namespace %s by --watch-namespace-selector", "selected" if selected else "no longer selected",
                 extra=kv(namespace=name, selector=self._selector.text, ingresses=len(ingresses)))
        return [(key, ingress if selected else None) for key, ingress in ingresses.items()]
