"""A Kubernetes API server for tests (see server.py): `from tests.kube_api import KubeApiServer`."""
from .server import KubeApiServer

__all__ = ["KubeApiServer"]
