"""The API test server as Gateway API tests use it: a cluster that applies the Gateway kinds (through
CustomObjectsApi, as kubectl would), and one controller watching it for a test module."""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from kubernetes import client

from tests.e2e.gateway.conftest import GatewayStage
from tests.e2e.kube.helpers import api_controller
from tests.kube_api import KubeApiServer
from tests.support import gateway_objects as gw
from tests.support.kube_cluster import ApiCluster

GROUP, VERSION = gw.GROUP, "v1"
PLURALS = {"GatewayClass": "gatewayclasses", "Gateway": "gateways", "HTTPRoute": "httproutes",
           "ReferenceGrant": "referencegrants", "GRPCRoute": "grpcroutes", "TLSRoute": "tlsroutes"}


class GatewayApiCluster(ApiCluster):
    """ApiCluster with the Gateway API kinds, through CustomObjectsApi."""

    def __init__(self, api_client: client.ApiClient) -> None:
        super().__init__(api_client)
        self.custom = client.CustomObjectsApi(api_client)

    def apply(self, *objects: dict) -> None:
        for obj in objects:
            if obj["kind"] in PLURALS:
                self._apply_custom(obj)
            else:
                super().apply(obj)

    def delete(self, *objects: dict) -> None:
        for obj in objects:
            if obj["kind"] in PLURALS:
                self._custom("delete", obj, obj["metadata"]["name"])
            else:
                super().delete(obj)

    def read(self, kind: str, name: str, ns: str | None = "default") -> dict[str, Any]:
        return self._custom("get", {"kind": kind, "metadata": {"name": name, "namespace": ns}}, name)

    def patch_status(self, kind: str, name: str, body: dict, ns: str = "default") -> dict[str, Any]:
        return self._custom("patch", {"kind": kind, "metadata": {"name": name, "namespace": ns}}, name, body,
                            status=True)

    def _apply_custom(self, obj: dict) -> None:
        self._ensure_namespace(obj)
        try:
            self._custom("create", obj, obj)
        except client.ApiException as err:
            if err.status != 409:
                raise
            current = self._custom("get", obj, obj["metadata"]["name"])
            self._custom("replace", obj, obj["metadata"]["name"],
                         {**obj, "metadata": {**obj["metadata"],
                                              "resourceVersion": current["metadata"]["resourceVersion"]}})

    def _custom(self, verb: str, obj: dict, *args: Any, status: bool = False) -> dict[str, Any]:
        namespaced = obj["kind"] != "GatewayClass"
        scope = "namespaced" if namespaced else "cluster"
        method = getattr(self.custom, f"{verb}_{scope}_custom_object{'_status' if status else ''}")
        where = (GROUP, VERSION, obj["metadata"].get("namespace") or "default") if namespaced else (GROUP, VERSION)
        response = method(*where, PLURALS[obj["kind"]], *args, _preload_content=False)
        try:
            return json.loads(response.data)
        finally:
            response.release_conn()


@contextmanager
def api_gateway_stage(directory: Path, kubeconfig_directory: Path, echo: Any, *controller_args: str,
                      cluster_type: type[GatewayApiCluster] = GatewayApiCluster) -> Iterator[GatewayStage]:
    """A controller (`pyngress up --kubeconfig`, `controller_args`) watching a fresh API test server that holds
    pyngress's GatewayClass, as the stage of a test module."""
    with KubeApiServer() as server, client.ApiClient(server.configuration()) as api_client:
        kubeconfig = server.write_kubeconfig(kubeconfig_directory / "kubeconfig")
        cluster = cluster_type(api_client)
        cluster.apply(gw.gateway_class())
        controller = api_controller(directory, kubeconfig, *controller_args).start()
        try:
            yield GatewayStage(controller, cluster, echo)
        finally:
            controller.stop()
