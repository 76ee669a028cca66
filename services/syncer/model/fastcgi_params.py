"""fastcgi-params-configmap: the FastCGI parameters of an Ingress with backend-protocol FCGI, from a ConfigMap.

As in ingress-nginx, the ConfigMap is the Ingress's namespace's (another one only with the controller
ConfigMap's allow-cross-namespace-resources), its keys are parameter names and its values their values, which
may hold nginx's FastCGI variables ($document_root, $fastcgi_script_name, ...: render.FASTCGI_VARIABLES). A
missing ConfigMap, or an entry that is not such a parameter, denies the Ingress's paths (503) until it is
fixed, as ingress-nginx denies the location.
"""
from __future__ import annotations

from typing import Any, Mapping

from services.nginxconf.render import RenderError, fastcgi_param_arguments

FastCgiParams = tuple[tuple[str, str], ...]


def fastcgi_params(store: Mapping[str, dict[str, Any]], reference: str, *, namespace: str,
                   allow_cross_namespace: bool, annotation: str) -> tuple[FastCgiParams, str | None]:
    """The parameters of the ConfigMap `reference` (NAME or NAMESPACE/NAME) named by an Ingress of `namespace`,
    sorted by name, or why its paths are denied; `annotation` is the full annotation name, for the message."""
    configmap_namespace, _, name = reference.rpartition("/")
    full = f"{configmap_namespace or namespace}/{name}"
    denied = "; its paths answer 503 until it is fixed"
    if configmap_namespace not in ("", namespace) and not allow_cross_namespace:
        return (), (f"{annotation}: ConfigMap {full} is in another namespace, which the controller ConfigMap's "
                    f"allow-cross-namespace-resources does not allow{denied}")
    configmap = store.get(f"ConfigMap/{full}")
    if configmap is None:
        return (), f"{annotation}: ConfigMap {full} was not found{denied}"
    data = configmap.get("data") or {}
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        return (), f"{annotation}: ConfigMap {full} data must be a map of strings{denied}"
    for key, value in sorted(data.items()):
        try:
            fastcgi_param_arguments(key, value)
        except RenderError as err:
            return (), f"{annotation}: ConfigMap {full} entry {key!r}: {err}{denied}"
    return tuple(sorted(data.items())), None
