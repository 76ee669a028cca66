"""The two pyngress-cni executables, which must behave the same: the Python reference (the venv's
launcher of services/cni_plugin/main.py) and the static C binary built from cni-plugin/ for nodes
without Python. Tests take a `plugin` fixture over PLUGIN_NAMES to run once with each."""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from tests.integration.cniserver.cni_processes import PLUGIN, REPO

STATIC_PLUGIN = REPO / "build" / "pyngress-cni-static"
PLUGIN_NAMES = ("python", "static")


def build_static_plugin(out: Path = STATIC_PLUGIN, *, timeout_seconds: int | None = None) -> Path:
    """Builds the static plugin (`make setup` does too; make skips an up-to-date binary). A variant with a
    short timeout lets tests see the timeout's message without waiting the real 150 s."""
    argv = ["make", "-s", "-C", str(REPO / "cni-plugin"), f"OUT={out}"]
    if timeout_seconds is not None:
        argv.append(f"EXTRA_CFLAGS=-DTIMEOUT_SECONDS={timeout_seconds}")
    done = subprocess.run(argv, capture_output=True, text=True)
    assert done.returncode == 0, f"building the static CNI plugin failed:\n{done.stdout}{done.stderr}"
    return out


@functools.cache
def plugin_path(name: str) -> Path:
    return PLUGIN if name == "python" else build_static_plugin()


def python_plugin_with_timeout(seconds: float) -> list[str]:
    """The reference plugin with its TIMEOUT_SECONDS changed, run as its launcher runs it (-IS)."""
    code = (f"import sys; sys.path.insert(0, {str(REPO)!r}); import services.cni_plugin.main as m; "
            f"m.TIMEOUT_SECONDS = {seconds!r}; sys.exit(m.main())")
    return [sys.executable, "-IS", "-c", code]
