"""--update-status-on-shutdown through the whole controller: SIGTERM stops supervisord's tree, the syncer,
still leading, clears the status of the Ingresses it served when no other replica is a ready endpoint of the
--publish-service Service, and keeps it when one is."""
from __future__ import annotations

import pytest
from kubernetes import client

from tests.e2e.ingress.scenarios import Stage
from tests.e2e.kube.helpers import SERVICE_NAME_LABEL, api_controller
from tests.support import k8s
from tests.support.net import wait_for

NS, SERVICE, POD = "ingress-nginx", "ingress-nginx-controller", "ingress-nginx-controller-5d8f9c-abcde"
LB_IP = "198.51.100.9"


def publish_service_objects(*pods: str) -> list[dict]:
    service = k8s.service(SERVICE, namespace=NS)
    service["spec"]["type"] = "LoadBalancer"
    slice_ = {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
              "metadata": {"name": f"{SERVICE}-abc", "namespace": NS, "labels": {SERVICE_NAME_LABEL: SERVICE}},
              "addressType": "IPv4", "ports": [{"name": "http", "port": 80, "protocol": "TCP"}],
              "endpoints": [{"addresses": [f"10.1.0.{i + 1}"], "conditions": {"ready": True},
                             "targetRef": {"kind": "Pod", "namespace": NS, "name": pod}}
                            for i, pod in enumerate(pods)]}
    return [service, slice_]


def ingress_status(api, name: str) -> list[dict]:
    [ingress] = [i for i in api.objects("Ingress") if i["metadata"]["name"] == name]
    return ((ingress.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []


@pytest.mark.parametrize("replicas, cleared", [((POD,), True), ((POD, "ingress-nginx-controller-5d8f9c-other"), False)],
                         ids=["last-replica", "another-replica-runs"])
def test_sigterm_clears_the_status_only_when_no_other_replica_runs(tmp_path, api, kubeconfig, cluster, echo,
                                                                  monkeypatch, replicas, cleared):
    name = f"shutdown-{len(replicas)}"
    cluster.apply(*publish_service_objects(*replicas))
    with client.ApiClient(api.configuration()) as api_client:  # the cloud's load balancer, as it would
        client.CoreV1Api(api_client).patch_namespaced_service_status(
            SERVICE, NS, {"status": {"loadBalancer": {"ingress": [{"ip": LB_IP}]}}})
    monkeypatch.setenv("POD_NAME", POD)
    monkeypatch.setenv("POD_NAMESPACE", NS)
    controller = api_controller(tmp_path, kubeconfig, f"--publish-service={NS}/{SERVICE}",
                                f"--election-id=shutdown-{len(replicas)}").start()
    try:
        stage = Stage(controller, cluster, echo)
        cluster.apply(*stage.backend("SHUTDOWN"),
                      k8s.ingress(name, [k8s.rule(f"{name}.example.com", ("/", "Prefix", "shutdown", 80))]))
        stage.expect(f"{name}.example.com", "/", "SHUTDOWN")
        wait_for(lambda: ingress_status(api, name) == [{"ip": LB_IP}], 20, what="the status written by the leader")
    finally:
        controller.stop()
    assert ingress_status(api, name) == ([] if cleared else [{"ip": LB_IP}])
    log = controller.log_path.read_text(errors="replace")
    assert ("Ingress status cleared at shutdown" if cleared else "Ingress status kept at shutdown") in log
