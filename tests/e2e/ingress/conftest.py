import pytest

from tests.support import k8s
from tests.support.controller import Controller, ManifestsCluster


@pytest.fixture(scope="module")
def manifests_controller(tmp_path_factory):
    """One controller per test module, watching its own manifests directory."""
    workdir = tmp_path_factory.mktemp("controller")
    cluster = ManifestsCluster(workdir / "manifests")
    cluster.apply(k8s.ingress_class("nginx"))
    controller = Controller(workdir, [f"--manifests={cluster.directory}"]).start()
    yield controller, cluster
    controller.stop()
