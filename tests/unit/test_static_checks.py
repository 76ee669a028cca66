"""ruff and mypy over the repository, with the rules set in pyproject.toml: `make test` fails on a finding.

Both run from the venv, as the user would run them by hand (`.venv/bin/ruff check`, `.venv/bin/mypy`).
mypy keeps its cache in .mypy_cache (git-ignored): a clone's first run is the slow one.
"""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240)


def test_ruff_finds_nothing() -> None:
    result = _run(str(BIN / "ruff"), "check", "--no-fix", "--output-format", "concise", ".")
    assert result.returncode == 0, f"ruff check (rules: pyproject.toml [tool.ruff]):\n{result.stdout}{result.stderr}"


def test_mypy_finds_nothing() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, f"mypy (settings: pyproject.toml [tool.mypy]):\n{result.stdout}{result.stderr}"
