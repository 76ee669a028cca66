"""Fixtures every end-to-end suite shares."""
from typing import Iterator

import pytest

from tests.support.controller import EchoBackends


@pytest.fixture(scope="session")
def echo() -> Iterator[EchoBackends]:
    """Echo backend processes, started on first use by name and shared by every e2e module."""
    backends = EchoBackends()
    yield backends
    backends.stop()
