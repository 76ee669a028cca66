"""The import direction between packages, read from the source (ast):

- a process package (one per supervised program) imports no other process package;
- `proto/` and the libraries under services/ (every package that is not a process or tools) import no
  process package and no tools;
- only services/tools (commands such as `pyngress render`) and services/cli.py may import several processes.
"""
import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVICES = REPO / "services"
PROCESSES = {"watcher", "syncer", "nginx", "proxy", "cniserver", "cniworker", "cni_plugin", "crashmon", "supervisor"}
TOOLS = {"tools"}


def _package_of(module: str) -> str | None:
    """"services.syncer.model.build" → "syncer"; "proto.codec" → "proto"; other modules → None."""
    parts = module.split(".")
    if parts[0] == "proto":
        return "proto"
    if parts[0] == "services" and len(parts) > 1:
        return parts[1]
    return None


def _imports(path: Path) -> set[str]:
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found.add(f"{base}.{node.module}" if node.module else base)
            elif node.module:
                found.add(node.module)
    return found


def _sources() -> list[Path]:
    return sorted([*SERVICES.rglob("*.py"), *(REPO / "proto").rglob("*.py")])


def _violations(path: Path) -> list[str]:
    own = _package_of(".".join(path.relative_to(REPO).with_suffix("").parts))
    if own in TOOLS or own is None or own == "cli":
        return []
    bad = []
    for module in _imports(path):
        target = _package_of(module)
        if target is None or target == own or target == "cli":
            continue
        if own in PROCESSES and target in PROCESSES:
            bad.append(f"process {own} imports process {target} ({module})")
        elif own not in PROCESSES and (target in PROCESSES or target in TOOLS):
            bad.append(f"library {own} imports {'process' if target in PROCESSES else 'tools'} {target} ({module})")
    return bad


def test_every_process_package_is_known():
    packages = {p.name for p in SERVICES.iterdir() if (p / "__init__.py").exists()}
    assert PROCESSES <= packages | {"supervisor"}


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_imports_follow_the_layers(path):
    assert _violations(path) == []


def test_the_check_catches_a_process_importing_another(tmp_path):
    assert _package_of("services.syncer.model.build") == "syncer" and _package_of("proto.codec") == "proto"
    fake = SERVICES / "syncer" / "_layers_probe.py"
    fake.write_text("from services.watcher.manifests import ManifestsSource\nfrom . import model\n")
    try:
        assert _violations(fake) == ["process syncer imports process watcher (services.watcher.manifests)"]
    finally:
        fake.unlink()
