"""`pyngress lint`: the admission webhook's decisions offline, over manifests or a cluster, before the move.

Every object is read as the watcher reads it (services/watcher/manifest_parser.py and manifest_objects.py; with
--kubeconfig, listed from the API), and every Ingress of this controller's class is judged by the webhook's own
Reviewer (services/syncer/admission/review.py), oldest first as the syncer takes them, each one against the
objects and the Ingresses admitted before it: what `kubectl apply` of the whole input would meet. One line per
problem, on stdout:

    FILE:LINE: ERROR: Ingress NAMESPACE/NAME: what is wrong and what to change
    FILE:LINE: WARNING: Ingress NAMESPACE/NAME: what is ignored

The controller ConfigMap (--configmap) gets the syncer's own lines: a key pyngress does not take is an ERROR with
the reason (services/syncer/model/configmap_unsupported.py). Then the migration checklist, from the tables the
docs are generated from, once per key per object:

    FILE:LINE: NOTE: ConfigMap NAMESPACE/NAME: key KEY: how it differs from ingress-nginx
    FILE:LINE: NOTE: Ingress NAMESPACE/NAME: annotation NAME: how it differs from ingress-nginx

for each key the controller ConfigMap sets and each annotation an Ingress of ours uses whose behaviour differs:
its `differs` text (services/tools/configmap_docs.py's DIFFERS, the annotation registry's entries), or an
annotation ingress-nginx reads and pyngress does not implement, or the reverse (services/tools/docs.py). The exit
code is 1 when there is an ERROR, else 0 (2 when the input cannot be read at all).

Kept light to import: `pyngress` builds its parser from this module (services/cli.py).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from services.common.settings import IngressSettings, parse_selector

if TYPE_CHECKING:
    from services.common.settings import Settings

_DEFAULTS = IngressSettings()
STDIN = "-"
# Kinds read from a cluster with --kubeconfig: those a review reads (EndpointSlices decide nothing there).
_CLUSTER_KINDS = ("IngressClass", "Service", "Secret", "ConfigMap", "Ingress")
# With --watch-namespace-selector, the Namespaces too: their labels say whose Ingresses are served.
_SELECTOR_KINDS = ("Namespace",)


@dataclass(frozen=True)
class Located:
    """An object and where it was read: "FILE:LINE", or "cluster"."""
    where: str
    obj: dict[str, Any]


class InputError(RuntimeError):
    """The input cannot be read at all (a missing directory or file, an unreachable cluster)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Judge every Ingress of this controller's class as the admission webhook would, and list "
                          "what differs from ingress-nginx in the annotations and ConfigMap keys used; exit code 1 "
                          "on an error.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifests", metavar="DIR", help="every *.yaml, *.yml and *.json file in DIR")
    source.add_argument("-f", "--filename", dest="files", metavar="FILE", action="append",
                        help="a manifest file ('-' for stdin); may be repeated")
    source.add_argument("--kubeconfig", metavar="PATH", help="the objects of the cluster this kubeconfig reaches")
    parser.add_argument("--ingress-class", default=_DEFAULTS.ingress_class,
                        help=f"the legacy kubernetes.io/ingress.class value that is ours (default "
                        f"{_DEFAULTS.ingress_class}); without an IngressClass of that name in the manifests, one "
                        "with --controller-class is assumed, as the install creates it")
    parser.add_argument("--controller-class", default=_DEFAULTS.controller_class,
                        help=f"the IngressClass spec.controller that is ours (default {_DEFAULTS.controller_class})")
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
                                   watch_ingress_without_class=namespace.watch_ingress_without_class,
                                   configmap=namespace.configmap, annotations_prefix=namespace.annotations_prefix,
                                   kubeconfig=namespace.kubeconfig, watch_namespace=namespace.watch_namespace,
                                   watch_namespace_selector=namespace.watch_namespace_selector)
    unreadable: list[str] = []
    try:
        if namespace.kubeconfig:
            objects = _cluster_objects(settings)
        else:
            objects, unreadable = _manifest_objects(namespace.manifests, namespace.files)
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
    store = {key: item.obj for key, item in located.items() if not key.startswith("Ingress/")}
    if assume_class and class_key not in store:
        store[class_key] = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                            "metadata": {"name": settings.ingress.ingress_class},
                            "spec": {"controller": settings.ingress.controller_class}}
    reviewer = Reviewer(settings)
    reviewer.replace_store(store)
    ingresses = sorted((key for key in located if key.startswith("Ingress/")),
                       key=lambda key: creation_order(located[key].obj, namespace=key.split("/")[1],
                                                      name=key.split("/", 2)[2]))
    verdicts = {}
    for key in ingresses:
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
            name = f"Ingress {key.split('/', 1)[1]}"
            lines += [_line(item.where, "ERROR", name, error) for error in verdicts[key].errors]
            lines += [_line(item.where, "WARNING", name, warning) for warning in verdicts[key].warnings]
    ours = [item for key, item in located.items() if key in verdicts and reviewer.judges(item.obj)]
    return lines + _configmap_checklist(configmap, settings) + _ingress_checklist(ours, settings)


def _line(where: str, severity: str, obj: str, message: str) -> str:
    return f"{where}: {severity}: {obj}: {message}"


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
    from services.tools.docs import INGRESS_NGINX_ANNOTATIONS, NOT_IMPLEMENTED, not_implemented_behaviour

    if name in NOT_IMPLEMENTED:
        return f"not implemented by pyngress: {not_implemented_behaviour(name)}"
    if name in ANNOTATIONS and name not in INGRESS_NGINX_ANNOTATIONS:
        return f"pyngress's own, which ingress-nginx does not read: {ANNOTATIONS[name].doc}"
    return ANNOTATIONS[name].differs if name in ANNOTATIONS else None


def _manifest_objects(directory: str | None, files: list[str] | None) -> tuple[list[Located], list[str]]:
    """The objects of the manifest files (a directory's as the watcher lists them), and a line for each part
    that cannot be read."""
    from services.watcher.manifest_parser import MANIFEST_SUFFIXES

    if directory is not None:
        folder = Path(directory)
        if not folder.is_dir():
            raise InputError(f"{directory} is not a directory; give --manifests an existing directory")
        paths = [str(folder / p.name) for p in sorted(folder.iterdir())
                 if p.name.endswith(MANIFEST_SUFFIXES) and not p.name.startswith(".") and p.is_file()]
    else:
        paths = list(files or ())
    objects: list[Located] = []
    unreadable: list[str] = []
    for path in paths:
        if path == STDIN:
            data = sys.stdin.buffer.read()
        else:
            try:
                data = Path(path).read_bytes()
            except OSError as err:
                raise InputError(f"cannot read {path}: {err.strerror}") from None
        found, problems = _file_objects(path, data)
        objects += found
        unreadable += problems
    return objects, unreadable


def _file_objects(path: str, data: bytes) -> tuple[list[Located], list[str]]:
    """One file's objects of the kinds pyngress reads, each with its line; a line for each part not read.
    Objects of other kinds (Deployments, ...) are no concern of lint's."""
    from services.watcher.manifest_objects import ACCEPTED_KINDS, objects_of
    from services.watcher.manifest_parser import Document, ManifestSyntaxError, parse_manifest

    name = "stdin.yaml" if path == STDIN else path
    shown = "<stdin>" if path == STDIN else path
    try:
        documents = parse_manifest(name, data)
    except ManifestSyntaxError as err:
        return [], [_line(f"{shown}:{err.line}", "ERROR", "file", f"{err.message}; nothing in it was read")]
    found, problems = [], []
    for document in documents:
        data_ = document.data
        is_list = isinstance(data_, dict) and isinstance(data_.get("items"), list) \
            and str(data_.get("kind", "")).endswith("List")
        items = data_["items"] if is_list else [data_]
        lines = document.item_lines if is_list else [document.line]
        for i, item in enumerate(items):
            if not isinstance(item, dict) or item.get("kind") not in ACCEPTED_KINDS:
                continue
            line = lines[i] if i < len(lines) else document.line
            accepted, rejected = objects_of(Document(index=document.index, line=line, data=item), shown)
            found += [Located(f"{shown}:{line}", obj) for obj in accepted]
            problems += [_line(f"{shown}:{line}", "ERROR", str(item.get("kind")), p.message) for p in rejected]
    return found, problems


def _cluster_objects(settings: Settings) -> list[Located]:
    """The objects of the cluster --kubeconfig reaches, listed once."""
    from kubernetes import client

    from services.common.kube import KubeConfigError, api_error_text, kube_configuration, read_json
    from services.watcher.kube_source import KIND_APIS

    try:
        api_client = client.ApiClient(kube_configuration(settings))
    except KubeConfigError as err:
        raise InputError(str(err)) from None
    objects = []
    for kind in _CLUSTER_KINDS + (_SELECTOR_KINDS if settings.source.watch_namespace_selector else ()):
        kind_api = KIND_APIS[kind]
        try:
            listed = read_json(getattr(kind_api.api_class(api_client), kind_api.list_all))
        except Exception as err:  # any failure of the API or the connection: the report would be wrong
            raise InputError(f"cannot list {kind} objects: {api_error_text(err)}") from None
        for obj in listed.get("items") or ():
            objects.append(Located("cluster", {"kind": kind, "apiVersion": kind_api.api_version, **obj}))
    return objects
