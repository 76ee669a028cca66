import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Sequence

import pytest

from tests.support.controller import Controller, ManifestsCluster, start_manifests_controller


@pytest.fixture(scope="module")
def manifests_controller(tmp_path_factory):
    """One controller per test module, watching its own manifests directory."""
    controller, cluster = start_manifests_controller(tmp_path_factory.mktemp("controller"))
    yield controller, cluster
    controller.stop()


@contextlib.contextmanager
def reachable(extra_args: Sequence[str] = ()) -> Iterator[tuple[Controller, ManifestsCluster]]:
    """A controller with its state dir where nginx's workers (user nobody) can reach files they open per
    request (htpasswd files, the auth cache), as under /var/lib/pyngress: pytest's tmp_path has 0700 parents."""
    base = Path(tempfile.mkdtemp(prefix="pyngress-e2e-", dir="/tmp"))
    os.chmod(base, 0o711)
    controller, cluster = start_manifests_controller(base, extra_args)
    try:
        yield controller, cluster
    finally:
        controller.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def reachable_controller():
    """Like manifests_controller, in a directory nginx's workers can reach (see `reachable`)."""
    with reachable() as started:
        yield started
