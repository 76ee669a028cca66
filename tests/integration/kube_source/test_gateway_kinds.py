"""KubeSource lists and watches the Gateway API kinds where their CRDs are installed, and goes on without them
where they are not (a 404 is "not installed", said once), picking them up once they are installed."""
from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
from pathlib import Path

from kubernetes import client

from services.common.settings import Settings
from tests.integration.kube_source.conftest import Harness
from tests.kube_api import KubeApiServer

GROUP = "gateway.networking.k8s.io"
ROUTE = {"apiVersion": f"{GROUP}/v1", "kind": "HTTPRoute", "metadata": {"name": "web"},
         "spec": {"parentRefs": [{"name": "edge"}], "rules": [{"backendRefs": [{"name": "web", "port": 80}]}]}}


def _custom(h: Harness) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(client.ApiClient(h.api.configuration()))


def test_gateway_kinds_are_listed_watched_and_deleted(harness):
    async def scenario():
        async with harness(watch_timeout=1) as h:
            custom = _custom(h)
            await h.call(custom.create_cluster_custom_object, GROUP, "v1", "gatewayclasses", {
                "apiVersion": f"{GROUP}/v1", "kind": "GatewayClass", "metadata": {"name": "pyngress"},
                "spec": {"controllerName": "pyngress.io/gateway-controller"}})
            await h.call(custom.create_namespaced_custom_object, GROUP, "v1", "default", "gateways", {
                "apiVersion": f"{GROUP}/v1", "kind": "Gateway", "metadata": {"name": "edge"},
                "spec": {"gatewayClassName": "pyngress", "listeners": [{"name": "http", "protocol": "HTTP",
                                                                         "port": 80}]}})
            await h.call(custom.create_namespaced_custom_object, GROUP, "v1", "default", "httproutes", ROUTE)
            await h.call(custom.create_namespaced_custom_object, GROUP, "v1beta1", "default", "referencegrants", {
                "apiVersion": f"{GROUP}/v1beta1", "kind": "ReferenceGrant", "metadata": {"name": "certs"},
                "spec": {"from": [{"group": GROUP, "kind": "Gateway", "namespace": "infra"}],
                         "to": [{"group": "", "kind": "Secret"}]}})
            keys = {"GatewayClass//pyngress", "Gateway/default/edge", "HTTPRoute/default/web",
                    "ReferenceGrant/default/certs"}
            await h.until(lambda: keys <= set(h.mirror), "the Gateway API objects in the store")
            route = h.mirror["HTTPRoute/default/web"]
            assert (route["kind"], route["apiVersion"]) == ("HTTPRoute", f"{GROUP}/v1")
            assert "managedFields" not in route["metadata"]
            await h.call(custom.patch_namespaced_custom_object, GROUP, "v1", "default", "httproutes", "web",
                         {"spec": {"hostnames": ["web.example.com"]}})
            await h.until(lambda: h.mirror["HTTPRoute/default/web"]["spec"].get("hostnames") == ["web.example.com"],
                          "the route's change")
            await h.call(custom.delete_namespaced_custom_object, GROUP, "v1", "default", "httproutes", "web")
            await h.until(lambda: "HTTPRoute/default/web" not in h.mirror, "the route's deletion")
            assert h.source.errors == []
    asyncio.run(scenario())


def test_without_the_crds_the_watcher_syncs_says_so_once_and_picks_them_up_when_installed(caplog):
    run_dir = Path(tempfile.mkdtemp(prefix="ks-"))
    try:
        with KubeApiServer(bookmark_interval=0.5, gateway_api=False) as api:
            settings = Settings.from_flags(kubeconfig=api.write_kubeconfig(run_dir / "kubeconfig"),
                                           run_dir=str(run_dir))

            async def scenario():
                caplog.set_level(logging.INFO, logger="services.watcher.kube_source")
                async with Harness(api, settings, recheck_missing=0.3) as h:
                    await asyncio.wait_for(h.source.synced.wait(), 10)
                    await h.call(h.networking.create_namespaced_ingress, "default", {
                        "metadata": {"name": "web"}, "spec": {"ingressClassName": "nginx", "rules": [
                            {"host": "web.example", "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": {
                                "service": {"name": "web", "port": {"number": 80}}}}]}}]}})
                    await h.until(lambda: "Ingress/default/web" in h.mirror, "the Ingress, Gateway API or not")
                    await asyncio.sleep(1.0)  # several looks for the CRDs
                    assert h.source.errors == []
                    absent = [r for r in caplog.records if "not available" in r.getMessage()]
                    assert sorted(str(r.fields["target"]).split()[0] for r in absent) == sorted(
                        ["GatewayClass", "Gateway", "HTTPRoute", "GRPCRoute", "ReferenceGrant", "TLSRoute",
                         "BackendTLSPolicy"])
                    api.install_gateway_api()
                    await h.call(_custom(h).create_namespaced_custom_object, GROUP, "v1", "default", "httproutes",
                                 ROUTE)
                    await h.until(lambda: "HTTPRoute/default/web" in h.mirror, "the route once the CRDs are in")
            asyncio.run(scenario())
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
