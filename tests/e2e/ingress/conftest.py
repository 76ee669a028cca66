import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.support.controller import start_manifests_controller


@pytest.fixture(scope="module")
def manifests_controller(tmp_path_factory):
    """One controller per test module, watching its own manifests directory."""
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"))
    yield controller, cluster
    controller.stop()


@pytest.fixture(scope="module")
def reachable_controller():
    """Like manifests_controller, with its state dir where nginx's workers (user nobody) can reach files they
    open per request (htpasswd files, the auth cache), as under /var/lib/pyngress: pytest's tmp_path has
    0700 parents."""
    base = Path(tempfile.mkdtemp(prefix="pyngress-e2e-", dir="/tmp"))
    os.chmod(base, 0o711)
    controller, cluster = start_manifests_controller(base)
    yield controller, cluster
    controller.stop()
    shutil.rmtree(base, ignore_errors=True)
