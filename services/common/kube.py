"""The Kubernetes API client helpers every process that talks to the API shares (watcher, leader election,
Ingress status): where the API server is, and calls that return the API's JSON as it is served.

Why the official client: it brings every way a kubeconfig or a pod authenticates (client certificates,
exec plugins, token files that rotate), proxies and TLS settings, exactly as kubectl does. Its typed
models are slow and rename fields, so responses are read raw (`_preload_content=False`) and parsed with
`json`: the store wants the objects exactly as the API serves them.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from kubernetes import client, config

from services.common.settings import Settings

CONNECT_TIMEOUT_SECONDS = 10.0
READ_TIMEOUT_SECONDS = 60.0


class KubeConfigError(RuntimeError):
    """No usable way to reach the API server."""


def kube_configuration(settings: Settings) -> client.Configuration:
    """The client configuration from --kubeconfig, else the pod's in-cluster service account."""
    configuration = client.Configuration()
    try:
        if settings.source.kubeconfig:
            config.load_kube_config(config_file=settings.source.kubeconfig, client_configuration=configuration,
                                    persist_config=False)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except (config.ConfigException, OSError, ValueError) as err:
        where = f"kubeconfig {settings.source.kubeconfig}" if settings.source.kubeconfig else "the in-cluster service account"
        raise KubeConfigError(f"cannot load the API server configuration from {where}: {err}; give "
                              "--kubeconfig PATH (or --manifests DIR to run without a cluster)") from err
    return configuration


def api_error_text(err: BaseException) -> str:
    """What a failed call says: "HTTP 403 Forbidden: <the API's own message>" for an API error (the message
    names the user, verb, resource and scope of a refusal), else the exception's type and text."""
    if isinstance(err, client.ApiException):
        text = f"HTTP {err.status} {err.reason or ''}".strip()
        try:
            message = json.loads(err.body or "{}").get("message")
        except (ValueError, AttributeError):
            message = None
        return f"{text}: {message}" if message else text
    return f"{type(err).__name__}: {err}"


def read_json(fn: Callable[..., Any], *args: Any,
              request_timeout: tuple[float, float] = (CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS),
              **kwargs: Any) -> dict[str, Any]:
    """(Blocking.) Call a client method and return the API's JSON rather than the client's typed model."""
    response = fn(*args, _preload_content=False, _request_timeout=request_timeout, **kwargs)
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()
