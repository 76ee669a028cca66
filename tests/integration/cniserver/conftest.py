"""A cniserver per test in a short private directory (Unix socket paths are limited to 107 bytes)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from tests.integration.cniserver.cni_processes import CniStack


@pytest.fixture
def workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pcni-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def stack(workdir: Path) -> Iterator[CniStack]:
    """A running cniserver (no worker yet); every process the test adds is stopped afterwards."""
    stack = CniStack(workdir, pod_cidr="10.250.0.0/24")
    try:
        stack.start_server()
        yield stack
    finally:
        stack.stop()

