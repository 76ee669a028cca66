"""Where one nginx instance keeps its files; the state directory names the instance.

- `<state-dir>/nginx/` is nginx's prefix: nginx.conf (0600), the fallback certificate (0600) and the
  temp directories. It is mode 0711: nginx's workers run as `nobody` and must reach the temp
  directories (request bodies and responses that do not fit in memory), but may not list anything.
  `auth/` there holds the htpasswd files of basic authentication: nginx's workers read them on every
  request, so the directory is 0750 and the files 0640, group the workers' (owner root); 0700/0600
  when the whole tree runs as one non-root user.
- `<state-dir>/dynamic/` (0700) holds the tables last pushed to nginx's Lua (routes, backends,
  certificates), read by the root master when it starts with empty shared dictionaries: `<table>.json` the
  whole table, and for a keyed table `<table>.deltas` the changes pushed since, one per line.
- `<run-dir>/nginx.pid` is the master's pid file.
- `<run-dir>/nginx/` (0700, root) holds nginx's Unix listening sockets: `config.sock`, the configuration
  API the syncer pushes tables to (and nginx's /healthz and /nginx_status), and `passthrough-tls.sock`,
  nginx's TLS listener behind the passthrough proxy. nginx makes its Unix sockets 0666 itself, so this
  directory is what keeps every other user out. No internal listener is on TCP: a tenant's Ingress (say
  to an ExternalName Service naming 127.0.0.1) or another user of the node cannot reach a Unix socket.
  `listeners.sock` there is the nginx-listeners program's: it hands nginx's listening sockets to each new
  master (services/nginx/listeners.py); `.<socket>.held` are hard links it keeps to nginx's Unix sockets,
  to put a socket file back if an exiting nginx removes it while the socket lives on.
- `<state-dir>/nginx/templates/` holds snapshots of a custom template (services/nginxconf/template.py).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The tables pushed to nginx's Lua without a reload, in the order they are pushed.
DYNAMIC_TABLES = ("backends", "certificates", "routes")


STREAM_ENDPOINTS_FILE = "endpoints.json"

# pyngress's own nginx module (nginx-module/): `make setup` builds it into build/, built against Debian's nginx
# source so that the packaged nginx loads it; the container image ships it and names it in this variable.
NGINX_MODULE_ENV = "PYNGRESS_NGINX_MODULE"
BUILT_NGINX_MODULE = Path(__file__).resolve().parents[2] / "build" / "ngx_http_pyngress_module.so"


def nginx_module() -> Path:
    """Where pyngress's nginx module is: nginx.conf loads it from there."""
    return Path(os.environ.get(NGINX_MODULE_ENV) or BUILT_NGINX_MODULE)


@dataclass(frozen=True)
class NginxPaths:
    state_dir: Path
    run_dir: Path

    @classmethod
    def of(cls, state_dir: str | Path, run_dir: str | Path) -> NginxPaths:
        return cls(Path(state_dir).absolute(), Path(run_dir).absolute())

    @property
    def prefix(self) -> Path:
        return self.state_dir / "nginx"

    @property
    def conf(self) -> Path:
        return self.prefix / "nginx.conf"

    @property
    def default_certificate(self) -> Path:
        """The fallback certificate and its key, in one PEM file so that they are always replaced together."""
        return self.prefix / "default-cert.pem"

    @property
    def temp(self) -> Path:
        return self.prefix / "tmp"

    @property
    def auth_dir(self) -> Path:
        """htpasswd files for auth_basic, written by the syncer (services/syncer/nginx_apply/worker_files.py)."""
        return self.prefix / "auth"

    @property
    def ssl_dir(self) -> Path:
        """Files nginx's master reads at each configuration load (ssl-dh-param's), root-only."""
        return self.prefix / "ssl"

    @property
    def stream_dir(self) -> Path:
        """What nginx's workers read per TCP or UDP connection (the endpoints of the stream servers)."""
        return self.prefix / "stream"

    @property
    def stream_endpoints(self) -> Path:
        return self.stream_dir / STREAM_ENDPOINTS_FILE

    @property
    def template_snapshots(self) -> Path:
        """Custom templates (--template) as checked and loaded, one directory per fingerprint (0755: the
        workers may load a Lua module lazily); `in-use` names the last one nginx loaded."""
        return self.prefix / "templates"

    @property
    def dynamic(self) -> Path:
        return self.state_dir / "dynamic"

    def table_file(self, table: str) -> Path:
        return self.dynamic / f"{table}.json"

    def table_journal(self, table: str) -> Path:
        return self.dynamic / f"{table}.deltas"

    @property
    def pid_file(self) -> Path:
        return self.run_dir / "nginx.pid"

    @property
    def socket_dir(self) -> Path:
        return self.run_dir / "nginx"

    @property
    def config_socket(self) -> Path:
        return self.socket_dir / "config.sock"

    @property
    def passthrough_tls_socket(self) -> Path:
        return self.socket_dir / "passthrough-tls.sock"

    @property
    def sockets(self) -> tuple[Path, ...]:
        """nginx's own Unix listening sockets."""
        return self.config_socket, self.passthrough_tls_socket

    @property
    def listeners_socket(self) -> Path:
        """Where the nginx-listeners program hands out nginx's listening sockets."""
        return self.socket_dir / "listeners.sock"

    def held_link(self, socket_path: Path) -> Path:
        """A second name for one of nginx's Unix sockets, from which its usual name can be restored."""
        return socket_path.parent / f".{socket_path.name}.held"
