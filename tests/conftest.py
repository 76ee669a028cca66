"""What the whole suite shares: the order its files start in.

`make test` runs files in parallel (pytest-xdist, --dist loadfile --no-loadscope-reorder), handing them to the
workers in collection order. A file that takes minutes, started last, keeps one worker busy long after the
other has finished: files marked `long_file` are collected first, so that they start at once, one in each
worker (the unit tests' many short files come last and fill in the end).
"""
from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "long_file: a test file that takes minutes; started first")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A stable sort: each file's tests keep their order and stay together.
    items.sort(key=lambda item: item.get_closest_marker("long_file") is None)
