"""`pyngress lint`: the admission webhook's decisions offline, over manifests or a cluster, before the move.

Every object is read as the watcher reads it (services/tools/inputs.py: the watcher's manifest parser; with
--kubeconfig, listed from the API), and every Ingress of this controller's class, then every Gateway and route
(HTTPRoute, GRPCRoute, TLSRoute) of its GatewayClasses, is judged by the webhook's own Reviewer
(services/syncer/admission/review.py), oldest first as the syncer takes them, each one against the objects and the
ones admitted before it: what `kubectl apply` of the whole input would meet. One line per problem, on stdout:

    FILE:LINE: ERROR: Ingress NAMESPACE/NAME: what is wrong and what to change
    FILE:LINE: WARNING: HTTPRoute NAMESPACE/NAME: what is ignored

The controller ConfigMap (--configmap) gets the syncer's own lines: a key pyngress does not take is an ERROR with
the reason (services/syncer/model/configmap_unsupported.py). Then the migration checklist, from the tables the
docs are generated from, once per key per object:

    FILE:LINE: NOTE: ConfigMap NAMESPACE/NAME: key KEY: how it differs from ingress-nginx
    FILE:LINE: NOTE: Ingress NAMESPACE/NAME: annotation NAME: how it differs from ingress-nginx

for each key the controller ConfigMap sets and each annotation an Ingress of ours uses whose behaviour differs:
its `differs` text (services/tools/configmap_docs.py's DIFFERS, the annotation registry's entries), or an
annotation ingress-nginx reads and pyngress does not implement, or the reverse (services/tools/ingress_nginx_annotations.py). The exit
code is 1 when there is an ERROR, else 0 (2 when the input cannot be read at all).

Kept light to import: `pyngress` builds its parser from this module (services/cli.py).
"""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Iterable

from services.common.settings import IngressSettings, parse_selector
from services.tools.inputs import InputError, Located, add_source_arguments, problem_line, read_objects

if TYPE_CHECKING:
    from services.common.settings import Settings

__all__ = ["Located", "lint", "run"]

_DEFAULTS = IngressSettings()
# Kinds read from a cluster with --kubeconfig: those a review reads (EndpointSlices decide nothing there), and the
# Namespaces (--watch-namespace-selector, allowedRoutes selectors). A Gateway API kind without its CRD lists none.
_CLUSTER_KINDS = ("IngressClass", "Service", "Secret", "ConfigMap", "Ingress", "Namespace", "GatewayClass",
                  "Gateway", "ReferenceGrant", "HTTPRoute", "GRPCRoute", "TLSRoute")
# Judged after the Ingresses, in this order (a route meets the Gateways admitted before it), each kind oldest first.
_JUDGED_GATEWAY_KINDS = (("Gateway",), ("HTTPRoute", "GRPCRoute", "TLSRoute"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Judge every Ingress of this controller's class, and every Gateway and route of its "
                          "GatewayClasses, as the admission webhook would, and list what differs from ingress-nginx "
                          "in the annotations and ConfigMap keys used; exit code 1 on an error.")
    add_source_arguments(parser)
    parser.add_argument("--ingress-class", default=_DEFAULTS.ingress_class,
                        help=f"the legacy kubernetes.io/ingress.class value that is ours (default "
                        f"{_DEFAULTS.ingress_class}); without an IngressClass of that name in the manifests, one "
                        "with --controller-class is assumed, as the install creates it")
    parser.add_argument("--controller-class", default=_DEFAULTS.controller_class,
                        help=f"the IngressClass spec.controller that is ours (default {_DEFAULTS.controller_class})")
    parser.add_argument("--gateway-controller-name", default=_DEFAULTS.gateway_controller_name, metavar="NAME",
                        help=f"the GatewayClass controllerName that is ours (default "
                        f"{_DEFAULTS.gateway_controller_name})")
    parser.add_argument("--watch-ingress-without-class", action="store_true",
                        help="Ingresses without a class are ours too")
    parser.add_argument("--configmap", metavar="NS/NAME", help="the controller ConfigMap, among the objects read")
    parser.add_argument("--annotations-prefix", default=_DEFAULTS.annotations_prefix,
                        help=f"the annotations' prefix (default {_DEFAULTS.annotations_prefix})")
    parser.add_argument("--watch-namespace", metavar="NAMESPACE",
                        help="only the Ingresses of this namespace are the controller's")
    parser.add_argument("--watch-namespace-selector", metavar="SELECTOR", type=parse_selector,
                        help="only the Ingresses of the namespaces whose labels match are the controller's (the "
                        "Namespace objects among the manifests, or the cluster's, carry the labels; an Ingress of a "
                        "namespace without one is not served)")


def run(namespace: argparse.Namespace) -> int:
    from services.common.settings import Settings

    settings = Settings.from_flags(ingress_class=namespace.ingress_class,
                                   controller_class=namespace.controller_class,
                                   gateway_controller_name=namespace.gateway_controller_name,
                                   watch_ingress_without_class=namespace.watch_ingress_without_class,
                                   configmap=namespace.configmap, annotations_prefix=namespace.annotations_prefix,
                                   kubeconfig=namespace.kubeconfig, watch_namespace=namespace.watch_namespace,
                                   watch_namespace_selector=namespace.watch_namespace_selector)
    try:
        objects, unreadable = read_objects(namespace, cluster_kinds=_CLUSTER_KINDS)
    except InputError as err:
        print(f"pyngress lint: {err}", file=sys.stderr)
        return 2
    lines = [*unreadable, *lint(objects, settings, assume_class=not namespace.kubeconfig)]
    for line in lines:
        print(line)
    errors = sum(": ERROR: " in line for line in lines)
    warnings = sum(": WARNING: " in line for line in lines)
    print(f"pyngress lint: {errors} error(s), {warnings} warning(s)", file=sys.stderr)
    return 1 if errors else 0


def lint(objects: Iterable[Located], settings: Settings, *, assume_class: bool) -> list[str]:
    """The report's lines for `objects` (a later object of the same key replaces an earlier one)."""
    from services.common.objects import object_key
    from services.syncer.admission.review import Reviewer
    from services.syncer.model.build import creation_order

    located = {object_key(item.obj): item for item in objects}
    class_key = f"IngressClass//{settings.ingress.ingress_class}"
    judged_kinds = ("Ingress", *(kind for kinds in _JUDGED_GATEWAY_KINDS for kind in kinds))
    store = {key: item.obj for key, item in located.items() if key.partition("/")[0] not in judged_kinds}
    if assume_class and class_key not in store:
        store[class_key] = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                            "metadata": {"name": settings.ingress.ingress_class},
                            "spec": {"controller": settings.ingress.controller_class}}
    reviewer = Reviewer(settings)
    reviewer.replace_store(store)

    def oldest_first(kinds: tuple[str, ...]) -> list[str]:
        return sorted((key for key in located if key.partition("/")[0] in kinds),
                      key=lambda key: creation_order(located[key].obj, namespace=key.split("/")[1],
                                                     name=key.split("/", 2)[2]))
    verdicts = {}
    for kinds in (("Ingress",), *_JUDGED_GATEWAY_KINDS):
        for key in oldest_first(kinds):
            verdicts[key] = verdict = reviewer.review(located[key].obj)
            if verdict.allowed:
                reviewer.apply_change(key, located[key].obj)  # admitted: the next ones meet it

    lines = []
    configmap = located.get(f"ConfigMap/{settings.ingress.configmap}")
    for problem in reviewer.cluster_problems:
        lines.append(_line(configmap.where if configmap else "--configmap", "ERROR" if problem.is_error
                           else "WARNING", problem.object, problem.message))
    for key, item in located.items():  # in the input's order
        if key in verdicts:
            kind, _, ref = key.partition("/")
            name = f"{kind} {ref}"
            lines += [_line(item.where, "ERROR", name, error) for error in verdicts[key].errors]
            lines += [_line(item.where, "WARNING", name, warning) for warning in verdicts[key].warnings]
    ours = [item for key, item in located.items()
            if key in verdicts and key.startswith("Ingress/") and reviewer.judges(item.obj)]
    return lines + _configmap_checklist(configmap, settings) + _ingress_checklist(ours, settings)


_line = problem_line


def _configmap_checklist(configmap: Located | None, settings: Settings) -> list[str]:
    """A NOTE for each key the controller ConfigMap sets whose behaviour differs from ingress-nginx's. (A key
    pyngress does not take is the model's own ERROR above, with its reason.)"""
    from services.tools.configmap_docs import DIFFERS

    data = (configmap.obj.get("data") if configmap else None) or {}
    return [_line(configmap.where, "NOTE", f"ConfigMap {settings.ingress.configmap}", f"key {key}: {DIFFERS[key]}")
            for key in sorted(data) if key in DIFFERS and configmap]


def _ingress_checklist(ingresses: list[Located], settings: Settings) -> list[str]:
    """A NOTE for each annotation each of our Ingresses uses whose behaviour differs from ingress-nginx's."""
    start = settings.ingress.annotations_prefix + "/"
    notes = []
    for item in ingresses:
        meta = item.obj.get("metadata") or {}
        obj = f"Ingress {meta.get('namespace') or 'default'}/{meta.get('name')}"
        for full_name in sorted(meta.get("annotations") or {}):
            if full_name.startswith(start) and (difference := _annotation_difference(full_name.removeprefix(start))):
                notes.append(_line(item.where, "NOTE", obj, f"annotation {full_name}: {difference}"))
    return notes


def _annotation_difference(name: str) -> str | None:
    """How the annotation `name` (without the prefix) behaves otherwise in ingress-nginx; None: the same."""
    from services.syncer.annotations import ANNOTATIONS
    from services.tools.ingress_nginx_annotations import (INGRESS_NGINX_ANNOTATIONS, NOT_IMPLEMENTED,
                                                          not_implemented_behaviour)

    if name in NOT_IMPLEMENTED:
        return f"not implemented by pyngress: {not_implemented_behaviour(name)}"
    if name in ANNOTATIONS and name not in INGRESS_NGINX_ANNOTATIONS:
        return f"pyngress's own, which ingress-nginx does not read: {ANNOTATIONS[name].doc}"
    return ANNOTATIONS[name].differs if name in ANNOTATIONS else None
