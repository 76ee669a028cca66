"""The pod subnet of this node: `--pod-cidr`, else the `spec.podCIDR` of the Node named by `--node-name`.

The Node comes from the watcher's store (clone pattern), so the CNI processes learn a node's subnet the
moment the API assigns it, without a restart; `--pod-cidr` given on the command line always wins. The
value is kept as text in CIDR form: `IpamSection.resolve` checks it when an ADD needs it and names the
problem there.
"""
from __future__ import annotations

import ipaddress
import logging
from typing import Callable

import zmq.asyncio

from proto import endpoints
from services.common.clone import CloneSubscriber, Snapshot

log = logging.getLogger(__name__)


class NodePodCidr:
    def __init__(self, *, run_dir: str, node_name: str | None, pod_cidr: str | None,
                 on_change: Callable[[str | None], None] | None = None) -> None:
        self.run_dir = run_dir
        self.node_name = node_name
        self.value: str | None = pod_cidr
        self._fixed = pod_cidr is not None
        self._on_change = on_change
        self._key = f"Node//{node_name}" if node_name else None

    @property
    def needs_following(self) -> bool:
        return not self._fixed and self._key is not None

    async def follow(self, ctx: zmq.asyncio.Context) -> None:
        """Keep `value` equal to the Node's spec.podCIDR until cancelled (only when needs_following)."""
        subscriber = CloneSubscriber(ctx, updates_endpoint=endpoints.watcher_updates(self.run_dir),
                                     snapshot_endpoint=endpoints.watcher_snapshot(self.run_dir))
        try:
            async for event in subscriber.events():
                if isinstance(event, Snapshot):
                    self._set(event.state.get(self._key or ""))  # needs_following: the key is set
                elif event.key == self._key:
                    self._set(event.value)
        finally:
            subscriber.close()

    def _set(self, node: dict | None) -> None:
        cidr = ((node or {}).get("spec") or {}).get("podCIDR")
        if cidr is not None:
            try:
                if not isinstance(cidr, str):
                    raise ValueError("not a string")
                cidr = str(ipaddress.ip_network(cidr))
            except ValueError:
                log.error("Node %s has an invalid spec.podCIDR %r; ignoring it", self.node_name, cidr)
                cidr = None
        if cidr != self.value:
            log.info("pod subnet from Node %s: %s", self.node_name, cidr)
            self.value = cidr
            if self._on_change:
                self._on_change(cidr)
