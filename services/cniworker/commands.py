"""The CNI commands, built from the small pieces beside them (ipam, netns, netlink, masquerade, results).

Each returns the CNI result (an empty dict for "no output") or raises CniError.
"""
from __future__ import annotations

import errno
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from ipaddress import IPv4Interface
from typing import Iterator

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError

from proto.cni import (CHECK_FAILED, CONTAINER_UNKNOWN, INTERNAL, INVALID_ENV, INVALID_NETWORK_CONFIG, IO_FAILURE,
                       PLUGIN_NOT_AVAILABLE, PLUGIN_NOT_AVAILABLE_LIMITED_CONNECTIVITY, CniError)
from services.common.cni_config.ipam import IpamConfig
from services.common.cni_config.network import NetworkConfig
from services.common.cni_config.request import CniRequest
from services.common.cni_config.runtime_env import AttachmentId, RuntimeEnv
from services.common.logs import kv

from . import masquerade, netlink
from .ipam.allocator import IpAllocator, release, release_where
from .ipam.disk_store import DiskStore
from .ipam.store import AllocationStore
from .netns import NetNS, NotANetworkNamespace
from .rtnl_batch import Link, RtnlSocket
from .results import Attachment, add_result

log = logging.getLogger("cniworker")

# An ADD trusts this process's check of its bridge (that it exists, is up and has the gateway address) for this
# long, as it trusts the masquerade rule: two netlink round trips of about 0.6 ms each per ADD saved. A bridge
# deleted meanwhile is noticed when the veth cannot join it; a gateway address removed by hand comes back with
# the next check. CHECK and UPDATE always look.
BRIDGE_RECHECK_SECONDS = 10.0
# (bridge, gateway, MTU) -> (its index, when this process last checked it: time.monotonic()).
_bridges_checked: dict[tuple[str, IPv4Interface, int], tuple[int, float]] = {}


def cmd_add(req: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    env, net = req.env, req.network
    ipam = net.ipam.resolve(pod_cidr)
    host_name = netlink.host_veth_name(env.container_id, env.ifname)
    store = DiskStore(state_dir, net.name)
    with _pod_netns(env) as ns, netlink.host_rtnl() as ipr, netlink.host_batch() as batch:
        bridge = _ensure_bridge(ipr, net=net, ipam=ipam, trust_seconds=BRIDGE_RECHECK_SECONDS)
        with _doing(f"allocating an address in {ipam.subnet}"):
            ip = IpAllocator(store, config=ipam, network=net.name).allocate(env.attachment)
            address = IPv4Interface(f"{ip}/{ipam.subnet.prefixlen}")
        try:
            host_end = _create_veth(ipr, batch, ns, req, ipam=ipam, host_name=host_name, bridge=bridge)
            host_mac = host_end.mac
            pod_mac = _configure_pod_interface(ns, req, ipam=ipam, address=address, pod_index=host_end.peer_index,
                                               replace_default_route=False)
            if net.ip_masq:
                _ensure_masquerade(net, ipam, trust_seconds=masquerade.RECHECK_SECONDS)
        except BaseException:
            _undo_add(ipr, host_name=host_name, store=store, owner=env.attachment)
            raise
    return _add_result(req, ipam=ipam, host_name=host_name, host_mac=host_mac, pod_mac=pod_mac, address=address)


def cmd_del(req: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    # Deleting the host end takes the pod end with it, so the pod's namespace (maybe gone
    # already, maybe an empty path) is never needed.
    env = req.env
    with netlink.host_rtnl() as ipr, _doing("deleting the host veth"):
        netlink.delete_link(ipr, netlink.host_veth_name(env.container_id, env.ifname))
    with _doing("releasing the address"):
        release(DiskStore(state_dir, req.network.name), env.attachment)
    return {}


def cmd_check(req: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    env, net = req.env, req.network
    ipam = net.ipam.resolve(pod_cidr)
    expected = _expectations(req)
    host_name = netlink.host_veth_name(env.container_id, env.ifname)
    with _pod_netns(env) as ns, netlink.host_rtnl() as ipr, _doing("inspecting the pod's network"):
        pod = ns.run(lambda: netlink.describe_pod_interface(env.ifname))
        port = netlink.describe_host_port(ipr, host_name)
        bridge = netlink.find_link(ipr, net.bridge)
        held = IpAllocator(DiskStore(state_dir, net.name), config=ipam, network=net.name).find(env.attachment)
        masquerading = net.ip_masq and masquerade.is_present(net.name, ipam.subnet)
    problems = _pod_problems(env, expected=expected, pod=pod)
    if port is None:
        problems.append(f"host veth {host_name} is missing")
    elif bridge is None or port.master != bridge["index"]:
        problems.append(f"host veth {host_name} is not attached to bridge {net.bridge}")
    elif not port.hairpin:
        problems.append(f"host veth {host_name} has hairpin mode off")
    if not any(a.ip == held for a in expected.addresses):
        problems.append(f"the IPAM store holds {held or 'no address'} for this container, not the one in prevResult")
    if net.ip_masq and not masquerading:
        problems.append(f"the masquerade rule of network {net.name} is missing")
    if problems:
        raise CniError(CHECK_FAILED, f"pod network of container {env.container_id} differs from its ADD result: "
                       + "; ".join(problems))
    return {}


def cmd_update(req: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    """Re-applies what ADD set up (bridge port, hairpin, MTU, address, default route, masquerade)
    to a pod that has it already; changes nothing when all is in place."""
    env, net = req.env, req.network
    ipam = net.ipam.resolve(pod_cidr)
    host_name = netlink.host_veth_name(env.container_id, env.ifname)
    held = IpAllocator(DiskStore(state_dir, net.name), config=ipam, network=net.name).find(env.attachment)
    if held is None:
        raise CniError(CONTAINER_UNKNOWN, f"container {env.container_id} ({env.ifname}) holds no address in "
                       f"network {net.name}: ADD it before UPDATE")
    address = IPv4Interface(f"{held}/{ipam.subnet.prefixlen}")
    with _pod_netns(env) as ns, netlink.host_rtnl() as ipr, netlink.host_batch() as batch:
        bridge = _ensure_bridge(ipr, net=net, ipam=ipam)
        if netlink.find_link(ipr, host_name) is None:
            raise CniError(CONTAINER_UNKNOWN, f"host veth {host_name} of container {env.container_id} is gone",
                           details="DEL and ADD the pod again to recreate its interface")
        with _doing(f"re-applying host veth {host_name}"):
            host_mac = netlink.set_host_port(batch, host_name, bridge_index=bridge, mtu=net.mtu).mac
        pod_mac = _configure_pod_interface(ns, req, ipam=ipam, address=address, pod_index=None,
                                           replace_default_route=True)
    if net.ip_masq:
        _ensure_masquerade(net, ipam)
    return _add_result(req, ipam=ipam, host_name=host_name, host_mac=host_mac, pod_mac=pod_mac, address=address)


def cmd_status(req: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    """Succeeds when an ADD could succeed now: the IPAM store is writable and has a free address."""
    net = req.network
    ipam = net.ipam.resolve(pod_cidr)
    store = DiskStore(state_dir, net.name)
    try:
        with store.locked():
            writable, allocated = store.writable(), bool(store.allocations())
    except OSError as e:
        raise CniError(PLUGIN_NOT_AVAILABLE, f"the IPAM store {store.directory} cannot be used: {e}") from e
    if not writable:
        raise CniError(PLUGIN_NOT_AVAILABLE, f"the IPAM store {store.directory} is not writable")
    if IpAllocator(store, config=ipam, network=net.name).free_count() == 0:
        raise CniError(PLUGIN_NOT_AVAILABLE, f"no free address left in subnet {ipam.subnet} of network {net.name}")
    if allocated:
        with netlink.host_rtnl() as ipr:
            bridge = netlink.find_link(ipr, net.bridge)
        if bridge is None or not bridge["flags"] & 1:
            raise CniError(PLUGIN_NOT_AVAILABLE_LIMITED_CONNECTIVITY,
                           f"bridge {net.bridge} is missing or down while pods of network {net.name} use it")
    return {}


def cmd_gc(req: CniRequest, *, state_dir: str, pod_cidr: str | None) -> dict:
    """Releases every allocation of the network that is not a valid attachment, and deletes its host veth."""
    net = req.network
    valid = net.valid_attachments or frozenset()
    with _doing("releasing stale addresses"):
        stale = release_where(DiskStore(state_dir, net.name), lambda holder: holder not in valid)
    with netlink.host_rtnl() as ipr, _doing("deleting stale host veths"):
        for holder in stale.values():
            netlink.delete_link(ipr, netlink.host_veth_name(holder.container_id, holder.ifname))
    if stale:
        log.info("gc released stale attachments", extra=kv(
            network=net.name, released=",".join(f"{ip}={h.container_id}/{h.ifname}" for ip, h in stale.items())))
    return {}


# --- helpers -------------------------------------------------------------------------------------

def _add_result(req: CniRequest, *, ipam: IpamConfig, host_name: str, host_mac: str, pod_mac: str,
                address: IPv4Interface) -> dict:
    """ADD's result, which UPDATE answers too."""
    env, net = req.env, req.network
    attachment = Attachment(host_ifname=host_name, host_mac=host_mac, pod_ifname=env.ifname, pod_mac=pod_mac,
                            sandbox=env.netns, address=address, gateway=ipam.gateway, mtu=net.mtu)
    return add_result(cni_version=net.cni_version, attachment=attachment, dns=net.dns)


def _ensure_bridge(ipr: IPRoute, *, net: NetworkConfig, ipam: IpamConfig, trust_seconds: float = 0.0) -> int:
    """The bridge's index, set up (with `trust_seconds`: as this process found it that recently)."""
    gateway = IPv4Interface(f"{ipam.gateway}/{ipam.subnet.prefixlen}")
    key = (net.bridge, gateway, net.mtu)
    checked = _bridges_checked.get(key)
    if checked is not None and time.monotonic() - checked[1] < trust_seconds:
        return checked[0]
    with _doing(f"setting up bridge {net.bridge}"):
        index = netlink.ensure_bridge(ipr, net.bridge, gateway=gateway, mtu=net.mtu)
    _bridges_checked[key] = (index, time.monotonic())
    return index


def _create_veth(ipr: IPRoute, batch: RtnlSocket, ns: NetNS, req: CniRequest, *, ipam: IpamConfig, host_name: str,
                 bridge: int) -> Link:
    """ADD's veth pair on `bridge` (an index _ensure_bridge may have trusted); the host end."""
    env, net = req.env, req.network
    with _doing(f"creating veth pair {host_name} / {env.ifname}"):
        def create(bridge_index: int) -> Link:
            return netlink.create_veth(ipr, batch, host_name=host_name, pod_ifname=env.ifname, netns_fd=ns.fd,
                                       bridge_index=bridge_index, mtu=net.mtu)
        try:
            return create(bridge)
        except NetlinkError as e:
            # EINVAL: no such master. The bridge this process trusted is gone: set it up again, and try once more.
            if e.code != errno.EINVAL or (fresh := _ensure_bridge(ipr, net=net, ipam=ipam)) == bridge:
                raise
            return create(fresh)


def _configure_pod_interface(ns: NetNS, req: CniRequest, *, ipam: IpamConfig, address: IPv4Interface,
                             pod_index: int | None, replace_default_route: bool) -> str:
    """The pod end's address, MTU and default route; its MAC. ADD knows the pod end's index (None: looked up),
    and leaves a default route another network set alone; UPDATE puts its own back."""
    env, mtu = req.env, req.network.mtu
    with _doing(f"{'re-applying' if replace_default_route else 'configuring'} {env.ifname} in {env.netns}"):
        return ns.run(lambda: netlink.configure_pod_interface(
            env.ifname, index=pod_index, address=address, gateway=ipam.gateway, mtu=mtu,
            replace_default_route=replace_default_route))


@contextmanager
def _pod_netns(env: RuntimeEnv) -> Iterator[NetNS]:
    if not env.netns:
        raise CniError(INVALID_ENV, f"CNI_NETNS is required for {env.command}")
    try:
        ns = NetNS(env.netns)
    except FileNotFoundError:
        raise CniError(CONTAINER_UNKNOWN, f"network namespace {env.netns} does not exist") from None
    except NotANetworkNamespace as e:
        raise CniError(INVALID_ENV, f"CNI_NETNS: {e}") from None
    except OSError as e:
        raise CniError(INVALID_ENV, f"cannot open network namespace {env.netns}: {e.strerror}") from None
    with ns:
        yield ns


@contextmanager
def _doing(what: str) -> Iterator[None]:
    """Turns a failure of one step into a CniError that says which step failed and why."""
    try:
        yield
    except CniError:
        raise
    except NetlinkError as e:
        raise CniError(INTERNAL, f"{what} failed: {os.strerror(e.code) if e.code else e}") from e
    except masquerade.NftError as e:
        raise CniError(INTERNAL, f"{what} failed", details=str(e)) from e
    except OSError as e:
        raise CniError(IO_FAILURE, f"{what} failed: {e}") from e
    except LookupError as e:
        raise CniError(INTERNAL, f"{what} failed: {e}") from e


def _ensure_masquerade(net: NetworkConfig, ipam: IpamConfig, *, trust_seconds: float = 0.0) -> None:
    with _doing(f"installing the masquerade rule for {ipam.subnet}"):
        masquerade.enable_ip_forwarding()
        masquerade.ensure(net.name, ipam.subnet, trust_seconds=trust_seconds)


def _undo_add(ipr: IPRoute, *, host_name: str, store: AllocationStore, owner: AttachmentId) -> None:
    """Rolls back a failed ADD; its own failures are logged, the original error is what the caller sees."""
    try:
        netlink.delete_link(ipr, host_name)
    except NetlinkError as e:
        if e.code != errno.ENODEV:
            log.warning("rollback could not delete host veth", extra=kv(veth=host_name, error=e))
    try:
        release(store, owner)
    except OSError as e:
        log.warning("rollback could not release the address", extra=kv(owner=owner, error=e))


@dataclass(frozen=True, kw_only=True)
class _Expected:
    """What the prevResult of CHECK promises about the pod interface."""
    addresses: set[IPv4Interface]
    routes: set[tuple[str, str | None]]  # (destination CIDR, gateway or None for any)
    mac: str | None


def _expectations(req: CniRequest) -> _Expected:
    prev, ifname = req.network.prev_result, req.env.ifname
    if not isinstance(prev, dict):
        raise CniError(INVALID_NETWORK_CONFIG, "CHECK needs prevResult (the result of the ADD) in the configuration")
    interfaces = prev.get("interfaces") or []
    try:
        addresses = {IPv4Interface(ip["address"]) for ip in prev.get("ips") or []
                     if _is_pod_interface(interfaces, index=ip.get("interface"), ifname=ifname)}
        routes = {(str(IPv4Interface(r["dst"]).network), r.get("gw")) for r in prev.get("routes") or []}
        mac = next((i.get("mac") for i in interfaces if i.get("name") == ifname and i.get("sandbox")), None)
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise CniError(INVALID_NETWORK_CONFIG, f"prevResult is malformed: {e!r}") from None
    return _Expected(addresses=addresses, routes=routes, mac=mac)


def _pod_problems(env: RuntimeEnv, *, expected: _Expected, pod: netlink.PodInterface | None) -> list[str]:
    if pod is None:
        return [f"interface {env.ifname} is missing from {env.netns}"]
    problems = [f"{env.ifname} lacks address {a}" for a in sorted(expected.addresses - pod.addresses)]
    problems += [f"{env.ifname} lacks route to {dst}" + (f" via {gw}" if gw else "")
                 for dst, gw in sorted(expected.routes, key=str)
                 if not any(d == dst and (gw is None or g == gw) for d, g in pod.routes)]
    if expected.mac and expected.mac.lower() != pod.mac:
        problems.append(f"{env.ifname} has MAC {pod.mac}, not {expected.mac}")
    if not pod.up:
        problems.append(f"{env.ifname} is down")
    return problems


def _is_pod_interface(interfaces: list, *, index: int | None, ifname: str) -> bool:
    if index is None:
        return True
    if not isinstance(index, int) or not 0 <= index < len(interfaces):
        return False
    return interfaces[index].get("name") == ifname and bool(interfaces[index].get("sandbox"))

