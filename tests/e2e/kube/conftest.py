"""Fixtures for the ingress e2e against the Kubernetes API test server: one API server per test module,
controllers started with --kubeconfig naming it, and the cluster as seen through the official client."""
from __future__ import annotations

from typing import Iterator

import pytest
from kubernetes import client

from tests.kube_api import KubeApiServer
from tests.support import k8s
from tests.support.kube_cluster import ApiCluster


@pytest.fixture(scope="module")
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


@pytest.fixture(scope="module")
def cluster(api: KubeApiServer) -> Iterator[ApiCluster]:
    api_client = client.ApiClient(api.configuration())
    cluster = ApiCluster(api_client)
    cluster.apply(k8s.ingress_class("nginx"))
    yield cluster
    api_client.close()


@pytest.fixture(scope="module")
def kubeconfig(api: KubeApiServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    return api.write_kubeconfig(tmp_path_factory.mktemp("kubeconfig") / "kubeconfig")
