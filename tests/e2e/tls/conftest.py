from pathlib import Path

import pytest

from services.nginxconf.paths import NginxPaths

from tests.e2e.ingress.scenarios import Stage
from tests.support.controller import start_manifests_controller

from .pki import TestCA, start_tls_echo

# --default-ssl-certificate names this Secret; the tests create and remove it.
DEFAULT_CERTIFICATE = "default/default-cert"
CONFIGMAP = "default/ingress-config"
END_CERTIFICATE = "-----END CERTIFICATE-----\n"
# The HTTPS backend: its own address, and a certificate no Secret holds.
BACKEND_IP = "127.0.30.2"
BACKEND_NAME = "tls backend"


@pytest.fixture(scope="session")
def ca(tmp_path_factory) -> TestCA:
    return TestCA(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="session")
def tls_backend(ca, tmp_path_factory) -> int:
    """The port of an HTTPS echo server on BACKEND_IP with certificate BACKEND_NAME (also for pt.tls.example)."""
    server = start_tls_echo((BACKEND_IP, 0), ca.issue(BACKEND_NAME, ("pt.tls.example",)),
                            tmp_path_factory.mktemp("tls-backend"))
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def tls_stage(tmp_path_factory, echo):
    """A controller with --default-ssl-certificate and --configmap, on its own manifests directory."""
    controller, cluster = start_manifests_controller(
        tmp_path_factory.mktemp("tls-controller"),
        [f"--default-ssl-certificate={DEFAULT_CERTIFICATE}", f"--configmap={CONFIGMAP}"])
    yield Stage(controller, cluster, echo)
    controller.stop()


@pytest.fixture(scope="module")
def passthrough_stage(tmp_path_factory, echo):
    """A controller with --enable-ssl-passthrough: the proxy processes own the HTTPS port."""
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("passthrough-controller"),
                                                     ["--enable-ssl-passthrough"])
    yield Stage(controller, cluster, echo)
    controller.stop()


@pytest.fixture(scope="module")
def fake_certificate(tls_stage, tmp_path_factory) -> Path:
    """nginx's generated fake certificate (without its key), for a client to trust."""
    controller = tls_stage.controller
    pem = NginxPaths.of(controller.state_dir, controller.run_dir).default_certificate.read_text()
    path = tmp_path_factory.mktemp("fake") / "fake.crt"
    path.write_text(pem[:pem.index(END_CERTIFICATE) + len(END_CERTIFICATE)])
    return path
