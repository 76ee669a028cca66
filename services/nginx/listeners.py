"""nginx's listening sockets, opened outside nginx so that they outlive every master.

Linux keeps a listening socket, and the connections waiting in its accept queue, for as long as one process
holds a descriptor of it. The nginx-listeners program (holder.py) opens nginx's listeners once and holds them;
`pyngress nginx` (launcher.py) receives them from it over a Unix socket (SCM_RIGHTS) and hands them to the
master it execs with nginx's own inheritance: the `NGINX` environment variable ("fd;fd;") that nginx's binary
upgrade uses. A killed master's workers keep accepting from the same sockets until the next master runs, and
while no nginx process accepts, connections wait in the queue instead of being refused.

What nginx does with inherited sockets (read in nginx 1.22's src/core/nginx.c, ngx_connection.c, ngx_cycle.c):
- Each is matched to a `listen` directive by socket type and address alone (getsockname: address and port, or
  the Unix path as it was bound). What is fixed when a socket is made is not made again: nginx takes an
  inherited socket's backlog to be 511 and calls listen() again only for a directive naming another one, so
  the backlog chosen here stays.
- `reuseport` on a directive would make nginx set SO_REUSEPORT on the inherited socket and open one more socket
  per further worker beside it. Those belong to that master: connections the kernel queued on them are reset
  when its workers close them, and while its workers are gone nobody accepts them. So the template has no
  `reuseport`: every worker accepts from the one held socket (epoll's EPOLLEXCLUSIVE wakes one of them);
  bench/bench_nginx_restart.py measures what that costs.
- It does not make them non-blocking, and with `multi_accept on` a worker would then block in accept() once
  the queue is empty: they are made non-blocking here (a flag of the socket, which every holder shares).
- An inherited socket that no `listen` names is closed, and a Unix one's file removed: only the sockets the
  configuration listens on are handed to a master.
- A master removes its Unix socket files when it exits, unless they were inherited and its parent is still
  the process that started it. The holder keeps a second hard link to each file to put the name back.

The ports Gateway listeners have to themselves (services/syncer/model/gateway/listeners.py) come and go with the
Gateways: nginx.conf names them on a `# gateway-listener-ports:` line of its own. A new one is bound by the master
as it reloads (a reload may open a port); the holder takes it over from that master once it has (holder.py), and
from then on it is held like the others. One that nginx.conf no longer names is closed.

When nothing holds them yet they are opened; when nginx processes of this instance hold them (workers of a
killed master, a master that outlived its launcher), they are taken over from those processes with
pidfd_getfd(2), which needs the right to ptrace them (root with CAP_SYS_PTRACE). Only when that is refused
are those processes stopped first, and connections are refused until the new master listens.
"""
from __future__ import annotations

import ctypes
import errno
import json
import logging
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from services.common import logs
from services.common.ipv6 import ipv6_available, is_no_ipv6_error
from services.common.runner import StartupError
from services.common.settings import Settings
from services.nginxconf import processes
from services.nginxconf.listen_addresses import bound_hosts, gateway_ports, listen_addresses
from services.nginxconf.paths import NginxPaths
from services.nginxconf.prefix import remove_if_stale

log = logging.getLogger(__name__)

# At most this many waiting connections per listener (the kernel caps it at net.core.somaxconn); it is what
# absorbs the connections that arrive while no master runs.
DEFAULT_BACKLOG = 4096
# The most listeners handed over at once (HTTP, HTTPS, two Unix sockets, the Gateway listeners' own ports: at most
# MAX_OWN_PORTS of services/syncer/model/gateway/listeners.py); Linux passes at most 253 in one message (SCM_MAX_FD).
MAX_LISTENERS = 253
HAND_OVER_TIMEOUT_SECONDS = 5.0

_SYS_PIDFD_GETFD = 438  # the same number on every Linux architecture (the unified syscall table, 5.6+)
_libc = ctypes.CDLL(None, use_errno=True)


class ListenerError(StartupError):
    """A listening socket can be neither opened nor taken over; the message says what to change."""


class HolderUnavailableError(ConnectionError):
    """The nginx-listeners program does not answer on its socket."""


@dataclass(frozen=True)
class Listener:
    """One address nginx listens on: `name` says what it is for, `address` is (host, port) for TCP or a
    Unix socket path."""
    name: str
    address: tuple[str, int] | str

    @property
    def is_unix(self) -> bool:
        return isinstance(self.address, str)

    @property
    def path(self) -> Path:
        assert isinstance(self.address, str), f"{self} is not a Unix socket"
        return Path(self.address)

    @property
    def family(self) -> int:
        if isinstance(self.address, str):
            return socket.AF_UNIX
        return socket.AF_INET6 if ":" in self.address[0] else socket.AF_INET

    def __str__(self) -> str:
        if isinstance(self.address, str):
            return f"unix:{self.address}"
        host, port = self.address
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def nginx_listeners(settings: Settings, paths: NginxPaths, ipv6: bool, bind: Sequence[str] = (),
                    gateway_ports: Sequence[int] = ()) -> tuple[Listener, ...]:
    """What templates/nginx.conf.j2 listens on with these settings (a `listen <port>` is every IPv4 address;
    with `ipv6`, `listen [::]:<port>` beside it is every IPv6 address, on a socket of its own). `bind`: the
    ConfigMap's bind-address, addresses that replace every address of their family. `gateway_ports`: the ports
    Gateway listeners have to themselves."""
    ipv4_hosts = [host for host in bind if ":" not in host] or ["0.0.0.0"]
    ipv6_hosts = [host for host in bind if ":" in host] or ["::"]

    def on(port: int, name: str) -> list[Listener]:
        return [Listener(name, (host, port)) for host in ipv4_hosts] + (
            [Listener(f"{name}-ipv6", (host, port)) for host in ipv6_hosts] if ipv6 else [])

    found = on(settings.ports.http, "http")
    if settings.ingress.enable_ssl_passthrough:
        # The passthrough proxy owns the HTTPS port; nginx takes TLS from it on a Unix socket.
        found.append(Listener("passthrough-tls", str(paths.passthrough_tls_socket)))
    else:
        found += on(settings.ports.https, "https")
    for port in gateway_ports:
        found += on(port, f"gateway-{port}")
    found.append(Listener("config", str(paths.config_socket)))
    return tuple(found)


def configured_listeners(settings: Settings, paths: NginxPaths) -> tuple[Listener, ...]:
    """nginx_listeners() for the nginx.conf in place: it listens on IPv6 or not, on every address or the bound ones
    (the ConfigMap's disable-ipv6 and bind-address are known to the syncer only); without one, as the bootstrap
    configuration will (every address, IPv6 too when the machine has it)."""
    try:
        text = paths.conf.read_text()
    except FileNotFoundError:
        return nginx_listeners(settings, paths, ipv6_available())
    return nginx_listeners(settings, paths, listens_on_ipv6(text, settings), bound_hosts(text, settings.ports.http),
                           gateway_ports(text))


def listens_on_ipv6(conf_text: str, settings: Settings) -> bool:
    return any(address.startswith("[") and address.endswith(f"]:{settings.ports.http}")
               for address in listen_addresses(conf_text))


def backlog() -> int:
    """The accept queue to ask for: the kernel's limit (net.core.somaxconn), as ingress-nginx sets it."""
    try:
        return max(511, int(Path("/proc/sys/net/core/somaxconn").read_text()))
    except (OSError, ValueError):
        return DEFAULT_BACKLOG


# --- opening and checking ---------------------------------------------------------------------------

def open_listener(listener: Listener, queue: int | None = None) -> socket.socket:
    """A new listening socket on `listener`'s address, non-blocking. Raises OSError (EADDRINUSE when taken)."""
    sock = socket.socket(listener.family, socket.SOCK_STREAM)
    try:
        if listener.is_unix:
            sock.bind(listener.address)
            # As nginx makes its own: the 0700 directory is the guard. (is_unix: the address is a path.)
            os.chmod(listener.address, 0o666)  # type: ignore[arg-type]
        else:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as nginx does
            if listener.family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)  # nginx's default, ipv6only=on
            sock.bind(listener.address)
        sock.listen(queue or backlog())
        sock.setblocking(False)
        return sock
    except BaseException:
        sock.close()
        raise


def is_listening_on(sock: socket.socket, listener: Listener) -> bool:
    """True when `sock` is a listening stream socket bound to `listener`'s address."""
    try:
        if sock.family != listener.family or sock.type != socket.SOCK_STREAM:
            return False
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            return False
        name = sock.getsockname()
    except OSError:
        return False
    if listener.is_unix:
        return name == listener.address
    return tuple(name[:2]) == listener.address


def acquire(listeners: Iterable[Listener], paths: NginxPaths) -> dict[Listener, socket.socket]:
    """A listening socket for each listener: opened, or taken over from this instance's nginx processes. An IPv6
    listener is left out, with a warning, when the machine has no IPv6 (the IPv4 ones still serve).

    Raises ListenerError naming the address that another process holds.
    """
    held: dict[Listener, socket.socket] = {}
    try:
        for listener in listeners:
            sock = _acquire(listener, paths)
            if sock is not None:
                held[listener] = sock
    except BaseException:
        close_all(held.values())
        raise
    return held


def _acquire(listener: Listener, paths: NginxPaths) -> socket.socket | None:
    if listener.is_unix:
        remove_if_stale(listener.path)
    try:
        return open_listener(listener)
    except OSError as err:
        if listener.family == socket.AF_INET6 and is_no_ipv6_error(err):
            log.warning("this machine has no IPv6: listening on IPv4 only",
                        extra=logs.kv(listener=str(listener), error=err.strerror))
            return None
        if err.errno != errno.EADDRINUSE:
            raise ListenerError(f"nginx cannot listen on {listener}: {err.strerror}") from None
    taken = take_over(listener, paths.prefix)
    if taken is not None:
        return taken
    if not holders_of(listener, paths.prefix):
        if listener.is_unix:
            raise ListenerError(f"another process listens on {listener.path}: give each pyngress instance its own "
                                "--run-dir")
        change = ("a Gateway listener's port" if listener.name.startswith("gateway-") else
                  f"--{listener.name.removesuffix('-ipv6')}-port")
        raise ListenerError(f"{listener} is in use by another process: stop it or choose another port ({change})")
    # Taking another process's descriptor needs the right to ptrace it (CAP_SYS_PTRACE for nginx's workers,
    # which run as another user). Without it, the old way: stop them, then listen.
    log.warning("cannot take the listening socket over from the nginx processes left running; stopping them "
                "(connections are refused until the new master listens)", extra=logs.kv(listener=str(listener)))
    processes.stop_stale(paths.prefix)
    deadline = time.monotonic() + 5.0
    while True:
        if listener.is_unix:
            remove_if_stale(listener.path)
        try:
            return open_listener(listener)
        except OSError as err:
            if err.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                raise ListenerError(f"nginx cannot listen on {listener}: {err.strerror}") from None
        time.sleep(0.1)


def close_all(socks: Iterable[socket.socket]) -> None:
    for sock in socks:
        sock.close()


# --- taking over from running nginx processes --------------------------------------------------------

def _listening_inodes(listener: Listener) -> set[str]:
    """The inodes of the listening sockets bound to `listener`'s address, from /proc/net (this namespace)."""
    inodes = set()
    if listener.is_unix:
        for line in _proc_lines("/proc/net/unix"):
            fields = line.split()
            # Num RefCount Protocol Flags Type St Inode Path; flag 0x10000 (__SO_ACCEPTCON): listening
            if len(fields) >= 8 and fields[7] == listener.address and int(fields[3], 16) & 0x10000:
                inodes.add(fields[6])
        return inodes
    host, port = listener.address  # type: ignore[str-unpack]  # not is_unix: (host, port)
    table = "/proc/net/tcp6" if listener.family == socket.AF_INET6 else "/proc/net/tcp"
    for line in _proc_lines(table):
        fields = line.split()
        if len(fields) < 10 or fields[3] != "0A":  # 0A: LISTEN
            continue
        hex_addr, hex_port = fields[1].split(":")
        if int(hex_port, 16) == port and _proc_address(hex_addr, listener.family) == host:
            inodes.add(fields[9])
    return inodes


def _proc_lines(table: str) -> list[str]:
    try:
        return Path(table).read_text().splitlines()[1:]
    except OSError:
        return []


def _proc_address(hex_addr: str, family: int) -> str:
    raw = bytes.fromhex(hex_addr)
    # /proc/net/tcp{,6} prints each 32-bit word of the address in host byte order.
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return socket.inet_ntop(family, words)


def holders_of(listener: Listener, prefix: Path) -> list[tuple[processes.NginxProcess, int]]:
    """(process, descriptor) for each nginx process of the instance holding a socket listening on `listener`;
    masters first (they run as root, like us; workers run as another user)."""
    inodes = _listening_inodes(listener)
    if not inodes:
        return []
    found = []
    for process in sorted(processes.instance_processes(prefix), key=lambda p: not p.is_master):
        fd_dir = Path(f"/proc/{process.pid}/fd")
        try:
            entries = os.listdir(fd_dir)
        except OSError:
            continue
        for entry in entries:
            try:
                target = os.readlink(fd_dir / entry)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                found.append((process, int(entry)))
                break
    return found


def take_over(listener: Listener, prefix: Path) -> socket.socket | None:
    """A descriptor of the socket this instance's nginx processes listen on at `listener`, or None when none
    holds one or the kernel refuses to let us take it (no right to ptrace them)."""
    for process, fd in holders_of(listener, prefix):
        try:
            pidfd = os.pidfd_open(process.pid)
        except OSError:
            continue  # gone meanwhile
        try:
            if not processes.is_alive(process, prefix):  # the pid is pinned now; check it is still the same
                continue
            sock = socket.socket(fileno=_pidfd_getfd(pidfd, fd))
        except OSError as err:
            log.debug("cannot take a listening socket from an nginx process",
                      extra=logs.kv(pid=process.pid, listener=str(listener), error=err.strerror))
            continue
        finally:
            os.close(pidfd)
        if is_listening_on(sock, listener):
            sock.setblocking(False)
            log.info("took over a listening socket from a running nginx process",
                     extra=logs.kv(listener=str(listener), pid=process.pid, process=process.title))
            return sock
        sock.close()  # the descriptor was reused for something else meanwhile
    return None


def _pidfd_getfd(pidfd: int, fd: int) -> int:
    """A copy (close-on-exec) of descriptor `fd` of the process `pidfd` refers to."""
    new = _libc.syscall(_SYS_PIDFD_GETFD, pidfd, fd, 0)
    if new < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return new


# --- the Unix socket files' second names -------------------------------------------------------------

def keep_second_names(held: Iterable[Listener], paths: NginxPaths) -> None:
    """Give each Unix listener's file a second (hidden) name, from which restore_names() puts it back."""
    for listener in held:
        if not listener.is_unix:
            continue
        link = paths.held_link(listener.path)
        if listener.path.exists():
            link.unlink(missing_ok=True)
            os.link(listener.path, link)


def restore_names(held: Iterable[Listener], paths: NginxPaths) -> list[Path]:
    """Put back each Unix listener's file that has gone (an nginx removed it as it exited); the ones restored."""
    restored = []
    for listener in held:
        if listener.is_unix and not listener.path.exists():
            link = paths.held_link(listener.path)
            try:
                os.link(link, listener.path)
            except FileNotFoundError:
                continue
            except FileExistsError:
                continue  # made again meanwhile
            restored.append(listener.path)
    return restored


def remove_names(held: Iterable[Listener], paths: NginxPaths) -> None:
    """Remove each Unix listener's file and its second name (when nothing serves them any more)."""
    for listener in held:
        if listener.is_unix:
            listener.path.unlink(missing_ok=True)
            paths.held_link(listener.path).unlink(missing_ok=True)


# --- handing them over -------------------------------------------------------------------------------

def hand_over(conn: socket.socket, held: Mapping[Listener, socket.socket]) -> None:
    """Send every held socket over the connected Unix socket `conn`: one JSON list naming them, with the
    descriptors attached (SCM_RIGHTS) in the same order."""
    header = json.dumps([{"name": listener.name, "address": str(listener)} for listener in held]).encode()
    socket.send_fds(conn, [header], [sock.fileno() for sock in held.values()])


def receive(path: Path, wanted: Iterable[Listener],
            timeout: float = HAND_OVER_TIMEOUT_SECONDS) -> dict[Listener, socket.socket]:
    """The wanted listeners among those the nginx-listeners program at `path` holds.

    Raises HolderUnavailableError when it does not answer. A socket that is not what its name says is left
    out (and closed), as is one not wanted.
    """
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(path))
            data, fds, flags, _ = socket.recv_fds(conn, 1 << 16, MAX_LISTENERS)
            while chunk := conn.recv(1 << 16):
                data += chunk
        except OSError as err:
            raise HolderUnavailableError(f"nginx-listeners does not answer on {path}: {err}") from err
    socks = [socket.socket(fileno=fd) for fd in fds]
    for sock in socks:
        os.set_inheritable(sock.fileno(), False)  # recvmsg() leaves them inheritable
    try:
        entries = json.loads(data)
        if flags & socket.MSG_CTRUNC or len(entries) != len(socks):
            raise ValueError(f"{len(entries)} listeners named, {len(socks)} descriptors received")
    except ValueError as err:
        close_all(socks)
        raise HolderUnavailableError(f"nginx-listeners on {path} sent something else: {err}") from None
    by_address: dict[str | None, Listener] = {str(listener): listener for listener in wanted}
    found: dict[Listener, socket.socket] = {}
    for entry, sock in zip(entries, socks):
        listener = by_address.get(entry.get("address") if isinstance(entry, dict) else None)
        if listener is not None and listener not in found and is_listening_on(sock, listener):
            sock.setblocking(False)
            found[listener] = sock
        else:
            sock.close()
    return found


def nginx_environment(held: Mapping[Listener, socket.socket]) -> str:
    """The value of the NGINX variable that makes nginx take these sockets, made inheritable."""
    for sock in held.values():
        os.set_inheritable(sock.fileno(), True)
    return "".join(f"{sock.fileno()};" for sock in held.values())
