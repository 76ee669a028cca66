"""Fixtures for the test API server's own tests: a fresh server per test and official clients for it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pytest
from kubernetes import client

from tests.kube_api import KubeApiServer


@dataclass
class Clients:
    core: client.CoreV1Api
    networking: client.NetworkingV1Api
    discovery: client.DiscoveryV1Api
    coordination: client.CoordinationV1Api
    api_client: client.ApiClient


@pytest.fixture
def api() -> Iterator[KubeApiServer]:
    with KubeApiServer(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def k8s(api: KubeApiServer) -> Iterator[Clients]:
    api_client = client.ApiClient(api.configuration())
    yield Clients(client.CoreV1Api(api_client), client.NetworkingV1Api(api_client),
                  client.DiscoveryV1Api(api_client), client.CoordinationV1Api(api_client), api_client)
    api_client.close()
