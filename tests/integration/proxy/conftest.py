"""One real setup per test module: CA and certificates, two TLS backends, nginx on the passthrough TLS
socket (PROXY protocol in, real client address out), the table publisher and a `pyngress proxy`."""
from __future__ import annotations

import resource
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.proxy.harness import (OTHER_HOST, PASS_HOST, Nginx, Pki, ProxyProcess, TablePublisher,
                                             TlsBackend, free_port, http_temp_paths, nginx_tls_socket, wait_for)

# Short enough to keep the slow-client tests quick; the production default is 5 s.
HELLO_TIMEOUT = "1.5"
MAX_PENDING_HELLOS = "100"


@dataclass
class Setup:
    pki: Pki
    backend_a: TlsBackend
    backend_b: TlsBackend
    table: TablePublisher
    run_dir: Path
    proxy: ProxyProcess
    port: int

    def publish(self, key: str, value: object) -> None:
        """Change the table and wait until the proxy has applied the change."""
        seq = self.table.set(key, value)
        self.proxy.wait_serving(table_seq=seq)

    def start_proxy(self, port: int) -> ProxyProcess:
        return ProxyProcess(port, self.run_dir, env=proxy_env()).wait_serving(self.table.publisher.seq)


def proxy_env() -> dict[str, str]:
    return {"PYNGRESS_PROXY_HELLO_TIMEOUT": HELLO_TIMEOUT, "PYNGRESS_PROXY_MAX_PENDING_HELLOS": MAX_PENDING_HELLOS}


@pytest.fixture(scope="session", autouse=True)
def enough_file_descriptors():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))


@pytest.fixture(scope="session")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def setup(pki, tmp_path_factory):
    work = tmp_path_factory.mktemp("proxy")
    run_dir = work / "run"
    run_dir.mkdir(mode=0o700)
    backend_a = TlsBackend("backend-a", *pki.issue("backend-a", [PASS_HOST]))
    backend_b = TlsBackend("backend-b", *pki.issue("backend-b", [PASS_HOST]))
    nginx_crt, nginx_key = pki.issue("nginx", [OTHER_HOST])
    nginx_socket = nginx_tls_socket(run_dir)
    nginx = Nginx(work / "nginx", f"""
http {{
    access_log off;
    {http_temp_paths(work / "nginx")}
    server {{
        listen unix:{nginx_socket} ssl proxy_protocol default_server;
        ssl_certificate {nginx_crt};
        ssl_certificate_key {nginx_key};
        set_real_ip_from unix:;
        real_ip_header proxy_protocol;
        location / {{ return 200 "$remote_addr:$remote_port $ssl_server_name\\n"; }}
    }}
}}
""")
    wait_for(nginx_socket.exists, what=f"nginx listening on {nginx_socket}")
    table = TablePublisher(run_dir)
    table.replace_all({f"host/{PASS_HOST}": [backend_a.address], "config": {"use_proxy_protocol": False}})
    port = free_port()
    proxy = ProxyProcess(port, run_dir, env=proxy_env()).wait_serving(table.publisher.seq)
    yield Setup(pki, backend_a, backend_b, table, run_dir, proxy, port)
    proxy.stop()
    table.close()
    nginx.stop()
    backend_a.close()
    backend_b.close()
