"""Leader election and Ingress status against the test API server."""
from __future__ import annotations

from typing import Iterator

import pytest
from kubernetes import client

from tests.kube_api import KubeApiServer


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        yield server


@pytest.fixture
def api_client(api: KubeApiServer) -> Iterator[client.ApiClient]:
    api_client = client.ApiClient(api.configuration())
    yield api_client
    api_client.close()
