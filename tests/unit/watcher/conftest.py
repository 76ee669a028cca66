from pathlib import Path

import pytest

from services.common.settings import Settings
from services.watcher.manifests import ManifestsSource


def service(name: str, namespace: str = "default", port: int = 80) -> str:
    return (f"apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
            f"spec:\n  ports:\n  - port: {port}\n")


class Manifests:
    """A manifests directory and a source over it, scanned by hand."""

    def __init__(self, root: Path, settings: Settings) -> None:
        self.directory = root / "manifests"
        self.directory.mkdir()
        self.state_dir = root / "state"
        self.settings = settings
        self.source = self.new_source()
        self._stores: dict[int, dict] = {}  # what each source's watcher would have published

    def new_source(self) -> ManifestsSource:
        """A source as a restarted watcher would have it."""
        return ManifestsSource(self.directory, settings=self.settings, state_dir=self.state_dir)

    def write(self, name: str, text: str) -> None:
        (self.directory / name).write_text(text)

    def scan(self, source: ManifestsSource | None = None, *, early: list[dict] | None = None) -> dict | None:
        """One scan of `source` (default: self.source): the whole store it publishes to, None when unchanged.
        `early`: a list to append the batches the scan publishes ahead of its end to (none are when left out)."""
        source = source or self.source
        store = self._stores.setdefault(id(source), {})

        def publish(objects: dict) -> None:
            early.append(objects)
            store.update(objects)

        changes = source.scan(publish if early is not None else None)
        if changes is None:
            return None
        for key in changes.removed:
            del store[key]
        store.update(changes.changed)
        return dict(store)

    def apply(self) -> dict | None:
        """Scan as the watcher does until a change settles (it must be seen on two scans in a row)."""
        results = [self.scan() for _ in range(2)]
        return next((r for r in reversed(results) if r is not None), None)


@pytest.fixture
def manifests(tmp_path) -> Manifests:
    return Manifests(tmp_path, Settings())


@pytest.fixture
def manifests_with(tmp_path):
    """Manifests for a source with the given settings."""
    return lambda settings: Manifests(tmp_path, settings)


@pytest.fixture
def svc():
    return service
