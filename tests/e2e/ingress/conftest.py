import pytest

from tests.support.controller import start_manifests_controller


@pytest.fixture(scope="module")
def manifests_controller(tmp_path_factory):
    """One controller per test module, watching its own manifests directory."""
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"))
    yield controller, cluster
    controller.stop()
