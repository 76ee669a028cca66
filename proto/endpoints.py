"""Where each process binds its ZeroMQ sockets, all under the run directory (mode 0700)."""
from __future__ import annotations

from pathlib import Path


def _ipc(run_dir: str | Path, name: str) -> str:
    return f"ipc://{Path(run_dir) / name}"


def watcher_updates(run_dir: str | Path) -> str:
    """PUB: object store changes (clone pattern)."""
    return _ipc(run_dir, "watcher-updates.sock")


def watcher_snapshot(run_dir: str | Path) -> str:
    """ROUTER: object store snapshots (clone pattern)."""
    return _ipc(run_dir, "watcher-snapshot.sock")


def syncer_updates(run_dir: str | Path) -> str:
    """PUB: the passthrough routing table (clone pattern)."""
    return _ipc(run_dir, "syncer-updates.sock")


def syncer_snapshot(run_dir: str | Path) -> str:
    """ROUTER: passthrough table snapshots (clone pattern)."""
    return _ipc(run_dir, "syncer-snapshot.sock")


def cni_workers(run_dir: str | Path) -> str:
    """ROUTER in cniserver (the load-balancing broker's back end); each cniworker connects a DEALER."""
    return _ipc(run_dir, "cni-workers.sock")
