"""The objects `pyngress lint` and `pyngress convert` read: `--manifests DIR | -f FILE | --kubeconfig PATH`.

Manifests are read as the watcher reads them (services/watcher/manifest_parser.py and manifest_objects.py), each
object with the file and line it starts at; a part that cannot be read is a line of its own ("FILE:LINE: ERROR:
file: why"), and the rest is read. With --kubeconfig the kinds asked for are listed once from the cluster ("cluster"
is then where each was read); a Gateway API kind whose CRD is not installed (or not permitted) is none.

Kept light to import: `pyngress` builds its parser from the commands' modules (services/cli.py).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

STDIN = "-"
HTTP_NOT_FOUND = 404
HTTP_FORBIDDEN = 403


@dataclass(frozen=True)
class Located:
    """An object and where it was read: "FILE:LINE", or "cluster"."""
    where: str
    obj: dict[str, Any]


class InputError(RuntimeError):
    """The input cannot be read at all (a missing directory or file, an unreachable cluster)."""


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """--manifests DIR | -f FILE (repeated, '-' for stdin) | --kubeconfig PATH, one of them required."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--manifests", metavar="DIR", help="every *.yaml, *.yml and *.json file in DIR")
    source.add_argument("-f", "--filename", dest="files", metavar="FILE", action="append",
                        help="a manifest file ('-' for stdin); may be repeated")
    source.add_argument("--kubeconfig", metavar="PATH", help="the objects of the cluster this kubeconfig reaches")


def read_objects(namespace: argparse.Namespace, *, cluster_kinds: Iterable[str]) -> tuple[list[Located], list[str]]:
    """The objects the source flags name, and a line for each part of a manifest that cannot be read; with
    --kubeconfig, the objects of `cluster_kinds`. Raises InputError when the input cannot be read at all."""
    if namespace.kubeconfig:
        return cluster_objects(namespace.kubeconfig, cluster_kinds), []
    return manifest_objects(namespace.manifests, namespace.files)


def problem_line(where: str, severity: str, obj: str, message: str) -> str:
    return f"{where}: {severity}: {obj}: {message}"


def manifest_objects(directory: str | None, files: list[str] | None) -> tuple[list[Located], list[str]]:
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
    Objects of other kinds (Deployments, ...) are no concern here."""
    from services.watcher.manifest_objects import ACCEPTED_KINDS, objects_of
    from services.watcher.manifest_parser import Document, ManifestSyntaxError, parse_manifest

    name = "stdin.yaml" if path == STDIN else path
    shown = "<stdin>" if path == STDIN else path
    try:
        documents = parse_manifest(name, data)
    except ManifestSyntaxError as err:
        return [], [problem_line(f"{shown}:{err.line}", "ERROR", "file", f"{err.message}; nothing in it was read")]
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
            problems += [problem_line(f"{shown}:{line}", "ERROR", str(item.get("kind")), p.message)
                         for p in rejected]
    return found, problems


def cluster_objects(kubeconfig: str, kinds: Iterable[str]) -> list[Located]:
    """The objects of `kinds` in the cluster `kubeconfig` reaches, listed once. A Gateway API kind whose CRD is not
    installed, or not readable, lists none (as the watcher takes it)."""
    import yaml
    from kubernetes import client

    from services.common.kube import KubeConfigError, api_error_text, kube_configuration, read_json
    from services.common.settings import Settings
    from services.watcher.kube_source import KIND_APIS

    try:
        api_client = client.ApiClient(kube_configuration(Settings.from_flags(kubeconfig=kubeconfig)))
    except KubeConfigError as err:
        raise InputError(str(err)) from None
    except yaml.YAMLError as err:  # the client's loader lets a file that is not YAML through as it is
        raise InputError(f"kubeconfig {kubeconfig} is not YAML: {err}; give the path of a kubeconfig") from None
    objects = []
    for kind in kinds:
        kind_api = KIND_APIS[kind]
        api = kind_api.api_class(api_client)
        custom = kind_api.custom
        listed: dict[str, Any] | None = None
        try:
            if custom is None:
                listed = read_json(getattr(api, kind_api.list_all))
            else:
                listed = _custom_objects(api, custom.group, custom.plural, custom.versions, read_json)
        except Exception as err:  # any failure of the API or the connection: the report would be wrong
            raise InputError(f"cannot list {kind} objects: {api_error_text(err)}") from None
        for obj in (listed or {}).get("items") or ():
            objects.append(Located("cluster", {"kind": kind, "apiVersion": kind_api.api_version, **obj}))
    return objects


def _custom_objects(api: Any, group: str, plural: str, versions: tuple[str, ...],
                    read_json: Callable[..., dict[str, Any]]) -> dict[str, Any] | None:
    """A CRD's objects at the first of `versions` the cluster serves; None when it serves none (or forbids them)."""
    from kubernetes.client.exceptions import ApiException

    for version in versions:
        try:
            return read_json(api.list_cluster_custom_object, group, version, plural)
        except ApiException as err:
            if err.status not in (HTTP_NOT_FOUND, HTTP_FORBIDDEN):
                raise
    return None
