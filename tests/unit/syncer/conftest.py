"""The `cluster` fixture of the model tests (tests/support/model_cluster.py)."""
import pytest

from tests.support.model_cluster import Cluster


@pytest.fixture
def cluster() -> Cluster:
    """An empty cluster with our IngressClass "nginx"."""
    c = Cluster()
    c.ingress_class()
    return c
