"""Several rtnetlink requests in one round trip: the few messages an ADD sends, encoded here.

pyroute2 sends one request and waits for its answer, about 0.6 ms a request in Python, and opening one of its
sockets in a pod's namespace costs as much again. The kernel handles every request of one sendmsg(2) in order,
answering each (an acknowledgement, or a link description and then the acknowledgement), so an ADD's host
side (create the veth pair, set hairpin, read the host end) and its pod side (address, loopback, default
route, read the pod end) are one round trip each here. A request that fails does not stop the ones after it:
each answer is checked, and the first failure raised as pyroute2's NetlinkError, as the rest of the worker
expects.

The layouts are the kernel's uapi (linux/netlink.h, linux/rtnetlink.h, linux/if_link.h).
"""
from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass
from typing import Iterator
from ipaddress import IPv4Address, IPv4Interface

from pyroute2.netlink.exceptions import NetlinkError

# Message types and flags.
RTM_NEWLINK, RTM_GETLINK, RTM_NEWADDR, RTM_NEWROUTE = 16, 18, 20, 24
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLM_F_REPLACE, NLM_F_EXCL, NLM_F_CREATE = 0x100, 0x200, 0x400
NLM_F_ACK_TLVS = 0x200  # on an NLMSG_ERROR: extended-ack attributes follow
NLMSGERR_ATTR_MSG = 1
# Socket options (SOL_NETLINK): the kernel's reason as text with an error, and no copy of the request.
SOL_NETLINK, NETLINK_CAP_ACK, NETLINK_EXT_ACK = 270, 10, 11
# Link attributes.
IFLA_ADDRESS, IFLA_IFNAME, IFLA_MTU, IFLA_LINK, IFLA_MASTER = 1, 3, 4, 5, 10
IFLA_LINKINFO, IFLA_NET_NS_FD = 18, 28
IFLA_INFO_KIND, IFLA_INFO_DATA, IFLA_INFO_SLAVE_DATA = 1, 2, 5
VETH_INFO_PEER = 1
IFLA_BRPORT_MODE = 4  # hairpin
NLA_F_NESTED = 0x8000
IFF_UP = 0x1
# Address and route attributes and values.
IFA_ADDRESS, IFA_LOCAL = 1, 2
RTA_OIF, RTA_GATEWAY = 4, 5
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_UNIVERSE, RTN_UNICAST = 254, 4, 0, 1  # proto static, as pyroute2 adds routes

_HEADER = struct.Struct("=IHHII")     # nlmsghdr: length, type, flags, sequence, port
_IFINFO = struct.Struct("=BxHiII")    # ifinfomsg: family, type, index, flags, change
_IFADDR = struct.Struct("=BBBBI")     # ifaddrmsg: family, prefix length, flags, scope, index
_RTMSG = struct.Struct("=BBBBBBBBI")  # rtmsg: family, dst/src length, tos, table, protocol, scope, type, flags
_ATTR = struct.Struct("=HH")          # rtattr: length, type
_ERROR = struct.Struct("=i")


def _attr(kind: int, payload: bytes) -> bytes:
    length = _ATTR.size + len(payload)
    return _ATTR.pack(length, kind) + payload + b"\0" * (-length % 4)


def _nested(kind: int, *attrs: bytes) -> bytes:
    return _attr(kind | NLA_F_NESTED, b"".join(attrs))


def _u32(kind: int, value: int) -> bytes:
    return _attr(kind, struct.pack("=I", value))


def _name(kind: int, value: str) -> bytes:
    return _attr(kind, value.encode() + b"\0")


def _link_body(*, index: int = 0, up: bool = False, attrs: tuple[bytes, ...] = ()) -> bytes:
    flags = IFF_UP if up else 0
    return _IFINFO.pack(socket.AF_UNSPEC, 0, index, flags, flags) + b"".join(attrs)


@dataclass(frozen=True)
class Request:
    type: int
    flags: int
    body: bytes


@dataclass(frozen=True)
class Link:
    """What a link request answers (RTM_NEWLINK): its index, MAC and IFLA_LINK (a veth's peer index)."""
    index: int
    mac: str
    peer_index: int | None


def create_veth(*, host_name: str, pod_ifname: str, netns_fd: int, bridge_index: int, mtu: int) -> Request:
    """A veth pair: the host end up on the bridge; the pod end created inside the namespace `netns_fd`, down (a
    peer asked up at creation fails with ENOTCONN: the kernel opens it before its other end exists)."""
    peer = _link_body(attrs=(_name(IFLA_IFNAME, pod_ifname), _u32(IFLA_NET_NS_FD, netns_fd),
                                      _u32(IFLA_MTU, mtu)))
    info = _nested(IFLA_LINKINFO, _name(IFLA_INFO_KIND, "veth"),
                   _nested(IFLA_INFO_DATA, _attr(VETH_INFO_PEER, peer)))
    body = _link_body(up=True, attrs=(_name(IFLA_IFNAME, host_name), _u32(IFLA_MTU, mtu),
                                      _u32(IFLA_MASTER, bridge_index), info))
    return Request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body)


def set_hairpin(name: str) -> Request:
    """Hairpin on for the bridge port `name` (its bridge-port attributes, as `ip link set NAME type bridge_slave
    hairpin on` sets them): a pod can reach itself through a service address that NATs back to it."""
    info = _nested(IFLA_LINKINFO, _nested(IFLA_INFO_SLAVE_DATA, _attr(IFLA_BRPORT_MODE, b"\1")))
    return Request(RTM_NEWLINK, 0, _link_body(attrs=(_name(IFLA_IFNAME, name), info)))


def get_link(*, name: str | None = None, index: int = 0) -> Request:
    return Request(RTM_GETLINK, 0, _link_body(index=index, attrs=(_name(IFLA_IFNAME, name),) if name else ()))


def set_link(index: int = 0, *, name: str | None = None, mtu: int | None = None,
             master: int | None = None) -> Request:
    """The link (by index, or by name) up, with its MTU and bridge when given."""
    attrs = ((_name(IFLA_IFNAME, name),) if name else ()) + ((_u32(IFLA_MTU, mtu),) if mtu else ()) + (
        (_u32(IFLA_MASTER, master),) if master else ())
    return Request(RTM_NEWLINK, 0, _link_body(index=index, up=True, attrs=attrs))


def add_address(index: int, address: IPv4Interface) -> Request:
    packed = address.ip.packed
    body = (_IFADDR.pack(socket.AF_INET, address.network.prefixlen, 0, RT_SCOPE_UNIVERSE, index)
            + _attr(IFA_LOCAL, packed) + _attr(IFA_ADDRESS, packed))
    return Request(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, body)


def default_route(index: int, gateway: IPv4Address, *, replace: bool) -> Request:
    body = (_RTMSG.pack(socket.AF_INET, 0, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_UNIVERSE, RTN_UNICAST, 0)
            + _attr(RTA_GATEWAY, gateway.packed) + _u32(RTA_OIF, index))
    return Request(RTM_NEWROUTE, NLM_F_CREATE | (NLM_F_REPLACE if replace else NLM_F_EXCL), body)


class Answer:
    """One request's outcome: `error` (0: done, else an errno, with the kernel's `message`) and the link it
    described, for a link request."""

    def __init__(self) -> None:
        self.error: int | None = None
        self.message = ""
        self.link: Link | None = None

    def check(self) -> None:
        """Raises the request's failure as pyroute2 does."""
        if self.error:
            raise NetlinkError(self.error, self.message or os.strerror(self.error))


class RtnlSocket:
    """A route netlink socket in the namespace of the thread that opens it (one thread uses it at a time)."""

    def __init__(self) -> None:
        self._sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW | socket.SOCK_CLOEXEC, socket.NETLINK_ROUTE)
        try:
            self._sock.setsockopt(SOL_NETLINK, NETLINK_EXT_ACK, 1)
            self._sock.setsockopt(SOL_NETLINK, NETLINK_CAP_ACK, 1)
            self._sock.bind((0, 0))
        except OSError:
            self._sock.close()
            raise
        self._sequence = 0

    def __enter__(self) -> RtnlSocket:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._sock.close()

    def exchange(self, requests: list[Request]) -> list[Answer]:
        """Sends `requests` in one message and returns each one's answer, in order."""
        if self._sequence > 1 << 31:
            self._sequence = 0  # a 32-bit field; every answer of the exchanges before has been read
        first = self._sequence + 1
        self._sequence += len(requests)
        out = bytearray()
        for offset, request in enumerate(requests):
            out += _HEADER.pack(_HEADER.size + len(request.body), request.type,
                                request.flags | NLM_F_REQUEST | NLM_F_ACK, first + offset, 0)
            out += request.body
        self._sock.send(out)
        answers = [Answer() for _ in requests]
        waiting = len(requests)
        while waiting:
            for kind, flags, sequence, payload in _messages(self._sock.recv(65536)):
                if not first <= sequence < first + len(answers):
                    continue  # an answer to an earlier exchange that was given up
                answer = answers[sequence - first]
                if kind == NLMSG_ERROR:
                    if answer.error is None:
                        waiting -= 1
                    answer.error = -_ERROR.unpack_from(payload)[0]
                    if flags & NLM_F_ACK_TLVS:
                        answer.message = _ack_message(payload[_ERROR.size + _HEADER.size:])
                elif kind == RTM_NEWLINK:
                    answer.link = _link_of(payload)
        return answers


def _messages(data: bytes) -> Iterator[tuple[int, int, int, bytes]]:
    """(type, flags, sequence, payload) of each netlink message in one datagram."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, flags, sequence, _ = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size:
            break
        yield kind, flags, sequence, data[offset + _HEADER.size:offset + length]
        offset += (length + 3) & ~3


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(type, payload) of each attribute."""
    offset = 0
    while offset + _ATTR.size <= len(data):
        length, kind = _ATTR.unpack_from(data, offset)
        if length < _ATTR.size:
            break
        yield kind & ~NLA_F_NESTED, data[offset + _ATTR.size:offset + length]
        offset += (length + 3) & ~3


def _ack_message(tlvs: bytes) -> str:
    for kind, value in _attrs(tlvs):
        if kind == NLMSGERR_ATTR_MSG:
            return value.rstrip(b"\0").decode(errors="replace")
    return ""


def _link_of(payload: bytes) -> Link:
    index = _IFINFO.unpack_from(payload)[2]
    mac, peer = "", None
    for kind, value in _attrs(payload[_IFINFO.size:]):
        if kind == IFLA_ADDRESS:
            mac = ":".join(f"{b:02x}" for b in value)
        elif kind == IFLA_LINK:
            peer = struct.unpack("=I", value[:4])[0]
    return Link(index=index, mac=mac, peer_index=peer)
