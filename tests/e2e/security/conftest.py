import pytest

from tests.e2e.ingress.scenarios import Stage
from tests.support.controller import start_manifests_controller


@pytest.fixture(scope="module", params=[False, True], ids=["https-by-nginx", "ssl-passthrough"])
def stage(request, tmp_path_factory, echo):
    """A controller on its own manifests directory; once with nginx on the HTTPS port, once with the
    passthrough proxy there (and nginx's TLS listener behind it)."""
    extra = ["--enable-ssl-passthrough"] if request.param else []
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("security-controller"), extra)
    yield Stage(controller, cluster, echo)
    controller.stop()
