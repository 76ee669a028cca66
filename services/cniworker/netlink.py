"""Links, addresses and routes: the host side (bridge, veth) and, for functions called through
netns.NetNS.run, the pod side (interface, loopback, default route). pyroute2 does the rare and the inspecting
work; what every ADD does goes as one batch per namespace (rtnl_batch)."""
from __future__ import annotations

import errno
import hashlib
import socket
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv4Interface
from typing import Callable, ContextManager, Iterator, TypeVar

from pyroute2 import IPRoute
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

from proto.cni import INVALID_ENV, INVALID_NETWORK_CONFIG, TRY_AGAIN_LATER, CniError

from . import rtnl_batch
from .rtnl_batch import Link, RtnlSocket

_MAIN_TABLE = 254
_HAIRPIN_ON = 1
_LOOPBACK_INDEX = 1  # the kernel gives `lo` index 1 in every network namespace
_Socket = TypeVar("_Socket", IPRoute, RtnlSocket)


def open_rtnl() -> IPRoute:
    """A netlink socket in the calling thread's namespace, subscribed to no events (nobody reads them)."""
    return IPRoute(groups=0)


_host = threading.local()


@contextmanager
def _kept(attribute: str, open_socket: Callable[[], _Socket]) -> Iterator[_Socket]:
    """A netlink socket in the worker's own namespace, kept open for the calling thread's next command: opening
    one costs about 0.5 ms, as much as a round trip. After any failure it is closed, so that a socket in an
    unknown state is never used again."""
    sock = getattr(_host, attribute, None)
    if sock is None:
        sock = open_socket()
        setattr(_host, attribute, sock)
    try:
        yield sock
    except BaseException:
        setattr(_host, attribute, None)
        sock.close()
        raise


def host_rtnl() -> ContextManager[IPRoute]:
    """pyroute2's socket in the worker's namespace (kept, see _kept)."""
    return _kept("ipr", open_rtnl)


def host_batch() -> ContextManager[RtnlSocket]:
    """A socket for batched requests (rtnl_batch) in the worker's namespace (kept, see _kept)."""
    return _kept("batch", RtnlSocket)


def host_veth_name(container_id: str, ifname: str) -> str:
    """The host end's name: derived, so DEL and GC find it without state; 15 characters, the kernel's limit."""
    return "veth" + hashlib.sha256(f"{container_id}/{ifname}".encode()).hexdigest()[:11]


@dataclass(frozen=True)
class HostPort:
    master: int | None
    hairpin: bool


@dataclass(frozen=True, kw_only=True)
class PodInterface:
    mac: str
    up: bool
    addresses: frozenset[IPv4Interface]
    routes: frozenset[tuple[str, str | None]]  # (destination CIDR, gateway or None)


def find_link(ipr: IPRoute, name: str) -> ifinfmsg | None:
    try:
        (link,) = ipr.link("get", ifname=name)
    except NetlinkError as e:
        if e.code == errno.ENODEV:
            return None
        raise
    return link


def ensure_bridge(ipr: IPRoute, name: str, *, gateway: IPv4Interface, mtu: int) -> int:
    """The bridge's index, after making sure it exists, is up and carries the gateway address.

    Safe when several workers run it at once: whoever loses the race to create the bridge gets
    EEXIST and uses the winner's."""
    link = find_link(ipr, name)
    if link is None:
        try:
            ipr.link("add", ifname=name, kind="bridge", mtu=mtu, state="up", address=_bridge_mac(name))
        except NetlinkError as e:
            if e.code != errno.EEXIST:
                raise
        link = find_link(ipr, name)
        if link is None:
            raise CniError(TRY_AGAIN_LATER, f"bridge {name} was deleted while it was being set up")
    kind = link.get_nested("IFLA_LINKINFO", "IFLA_INFO_KIND")
    if kind != "bridge":
        raise CniError(INVALID_NETWORK_CONFIG,
                       f"{name} exists on the host but is a {kind or 'plain'} link, not a bridge: "
                       "choose another \"bridge\" name in the network configuration")
    index = link["index"]
    if not link["flags"] & 1:  # IFF_UP
        ipr.link("set", index=index, state="up")
    _add_address(ipr, index, address=gateway)
    return index


def _bridge_mac(name: str) -> str:
    # A bridge without an address of its own takes the lowest MAC of its ports, so the gateway's
    # MAC would change whenever a pod comes or goes and the other pods' ARP entries would go stale.
    # Derived from the name (locally administered, unicast) so racing workers agree on it.
    digest = hashlib.sha256(name.encode()).digest()
    return ":".join(f"{b:02x}" for b in (0x02, *digest[:5]))


def delete_link(ipr: IPRoute, name: str) -> bool:
    """Deletes `name` if it exists (a veth takes its peer along); False when there was nothing to delete."""
    try:
        ipr.link("del", ifname=name)
    except NetlinkError as e:
        if e.code == errno.ENODEV:
            return False
        raise
    return True


def create_veth(ipr: IPRoute, batch: RtnlSocket, *, host_name: str, pod_ifname: str, netns_fd: int,
                bridge_index: int, mtu: int) -> Link:
    """A veth pair whose host end is up on the bridge with hairpin on, and whose other end is
    created directly inside the pod's namespace (so `eth0` never clashes with a host interface), in one round
    trip. A host end left by an earlier attempt of the same attachment is replaced. Returns the host end (its
    MAC, and the pod end's index in the pod's namespace)."""
    def add() -> Link:
        created, hairpin, described = batch.exchange([
            rtnl_batch.create_veth(host_name=host_name, pod_ifname=pod_ifname, netns_fd=netns_fd,
                                   bridge_index=bridge_index, mtu=mtu),
            rtnl_batch.set_hairpin(host_name), rtnl_batch.get_link(name=host_name)])
        created.check()  # the other two then acted on what this one made
        hairpin.check()
        described.check()
        if described.link is None or described.link.peer_index is None:
            raise LookupError(f"veth {host_name} was created but the kernel did not describe it")
        return described.link
    try:
        try:
            return add()
        except NetlinkError as e:
            # Deleting first would cost every ADD a round trip for what is rare.
            if e.code != errno.EEXIST or not delete_link(ipr, host_name):
                raise
            return add()
    except NetlinkError as e:
        if e.code != errno.EEXIST:
            raise
        # No stale host end (or it is gone now), so the clash is inside the pod.
        raise CniError(INVALID_ENV, f"cannot create interface {pod_ifname} in the pod: an interface with that "
                                    "name exists there already",
                       details="choose another CNI_IFNAME, or DEL the attachment that created it") from None


def describe_host_port(ipr: IPRoute, name: str) -> HostPort | None:
    link = find_link(ipr, name)
    if link is None:
        return None
    master = link.get("master")
    hairpin = False
    if master:
        (port,) = ipr.brport("show", index=link["index"])
        hairpin = port.get_nested("IFLA_PROTINFO", "IFLA_BRPORT_MODE") == _HAIRPIN_ON
    return HostPort(master=master, hairpin=hairpin)


def set_host_port(batch: RtnlSocket, name: str, *, bridge_index: int, mtu: int) -> Link:
    """Puts an existing host end back on the bridge, up, with the MTU and hairpin (UPDATE), in one round trip;
    returns it as the kernel then describes it."""
    placed, hairpin, described = batch.exchange([
        rtnl_batch.set_link(name=name, mtu=mtu, master=bridge_index), rtnl_batch.set_hairpin(name),
        rtnl_batch.get_link(name=name)])
    placed.check()
    hairpin.check()
    described.check()
    if described.link is None:
        raise LookupError(f"interface {name} was not described by the kernel")
    return described.link


# --- inside the pod's namespace (call through NetNS.run) -------------------------------------------

def configure_pod_interface(ifname: str, *, index: int | None, address: IPv4Interface, gateway: IPv4Address,
                            mtu: int, replace_default_route: bool) -> str:
    """Brings `ifname` (whose index ADD knows from the host end; None: looked up) and `lo` up with the address,
    MTU and a default route via the gateway, in one round trip; returns the MAC.

    With replace_default_route False an existing default route (another network's) is left alone."""
    with RtnlSocket() as sock:
        if index is None:
            (found,) = sock.exchange([rtnl_batch.get_link(name=ifname)])
            if found.error == errno.ENODEV:
                raise LookupError(f"interface {ifname} does not exist in the pod")
            found.check()
            assert found.link is not None
            index = found.link.index
        up, addressed, loopback, routed, described = sock.exchange([
            rtnl_batch.set_link(index, mtu=mtu), rtnl_batch.add_address(index, address),
            rtnl_batch.set_link(_LOOPBACK_INDEX), rtnl_batch.default_route(index, gateway, replace=replace_default_route),
            rtnl_batch.get_link(index=index)])
        up.check()
        if addressed.error != errno.EEXIST:
            addressed.check()
        loopback.check()
        if replace_default_route or routed.error != errno.EEXIST:
            routed.check()
        described.check()
        assert described.link is not None
        return described.link.mac


def describe_pod_interface(ifname: str) -> PodInterface | None:
    with open_rtnl() as ipr:
        link = find_link(ipr, ifname)
        if link is None:
            return None
        index = link["index"]
        addresses = frozenset(IPv4Interface(f"{a.get('address')}/{a['prefixlen']}")
                              for a in ipr.addr("dump", index=index, family=socket.AF_INET))
        routes = frozenset((f"{r.get('dst') or '0.0.0.0'}/{r['dst_len']}", r.get("gateway"))
                           for r in ipr.route("dump", family=socket.AF_INET, table=_MAIN_TABLE)
                           if r.get("oif") == index)
        return PodInterface(mac=link.get("address"), up=bool(link["flags"] & 1), addresses=addresses, routes=routes)


# --- helpers -------------------------------------------------------------------------------------

def _add_address(ipr: IPRoute, index: int, *, address: IPv4Interface) -> None:
    try:
        ipr.addr("add", index=index, address=str(address.ip), prefixlen=address.network.prefixlen)
    except NetlinkError as e:
        if e.code != errno.EEXIST:
            raise
