"""Instructions per request through one plain Ingress, counted by valgrind (callgrind), beside the static nginx and
the static nginx sending ingress-nginx's headers of bench_dataplane.py; and where pyngress's instructions go.

bench_dataplane.py measures what a client sees, but on this shared machine its figures move by about 10% between
runs, more than most single changes to the request path. Instructions executed in user space do not move: each
nginx runs here as one process (master_process off, one worker) under callgrind, takes WARM requests on keep-alive
connections, then the counters are zeroed and it takes REQUESTS more; the figure is the instructions of those
divided by REQUESTS. pyngress's nginx is its rendered nginx.conf (a running controller's, with the same tables)
with the listen address changed. The kernel's share (the socket work, about two thirds of nginx's time and the
same in all three) is not counted. Timers (pyngress's metrics batch once a second) run by the clock, not per
request: how many fall in the counted requests moves with the machine's load, by up to 1,000 instructions per
request here, so each count is also shown without them.

With --scenario tls the same over HTTPS: the Ingress's certificate from a Secret, the static servers with the same
certificate, the client sending SNI; the handshakes (one per REQUESTS_PER_CONNECTION requests) are counted too,
alike in all three.

Run: .venv/bin/python bench/bench_request_cost.py [--scenario plain|tls] [--requests N] [--warm N]   (needs valgrind)
"""
from __future__ import annotations

import argparse
import os
import re
import socket
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bench_dataplane import (FORWARDED_HEADERS, HOST, PLAIN_HEADERS, Scenario, answers,  # noqa: E402
                                   scenario_cluster, start_ok_backend, static_proxy, stop_nginx)
from tests.support.controller import Controller  # noqa: E402
from tests.integration.proxy.harness import wait_listening  # noqa: E402
from tests.support.net import free_port, wait_for  # noqa: E402

# Where pyngress's instructions go: callgrind's inclusive count of the nginx and ngx_lua functions that run each part.
PARTS = (("router (rewrite_by_lua, until its jump)", "ngx_http_lua_rewrite_handler", "ngx_http_named_location"),
         ("balancer: Lua (affinity, retry budgets, error pages)", "ngx_http_lua_balancer_handler_inline", None),
         ("balancer: pyngress's module, with the connect", "ngx_event_connect_peer", None),
         ("log phase: metrics (pyngress's nginx module)", "ngx_http_pyngress_log_handler", None),
         ("log phase: Lua (ewma, tracing)", "ngx_http_lua_log_handler", None),
         ("request id (OpenSSL RAND_bytes)", "RAND_bytes", None))
# What runs by the clock rather than per request.
TIMERS = "ngx_event_expire_timers"
# nginx closes a keep-alive connection after keepalive_requests (1000 in both) requests.
REQUESTS_PER_CONNECTION = 900


def single_process(conf: str, port: int, directory: Path, tls: bool) -> str:
    """`conf` run as one process listening on 127.0.0.1:`port` (with `tls`, for HTTPS), its pid and sockets in
    `directory`."""
    conf = re.sub(r"(?m)^\s*(daemon|master_process|worker_processes|pid|error_log) [^;]*;\s*$", "", conf)
    conf = re.sub(r"daemon off; worker_processes \w+; pid [^;]*; error_log [^;]*;", "", conf)
    # pyngress's public server listens on inherited sockets, HTTP and HTTPS; the static ones on one address
    # (followed by "ssl" and their certificate over TLS).
    conf = re.sub(r"(?m)^\s*listen \[::\]:\d+[^;]*;$", "", conf)  # the IPv6 sockets the holder would pass
    conf = re.sub(r"listen \d+ default_server;(?:\s*#[^\n]*)*\s*listen \d+ ssl http2 default_server;",
                  f"listen 127.0.0.1:{port}{' ssl' if tls else ''} default_server;", conf)
    conf = re.sub(r"listen 127\.0\.0\.1:\d+ backlog=4096", f"listen 127.0.0.1:{port}", conf)
    conf = re.sub(r'listen "unix:[^"]*";', f'listen "unix:{directory}/config.sock";', conf)
    return (f"daemon off; master_process off; worker_processes 1; pid {directory}/nginx.pid; "
            f"error_log {directory}/error.log error;\n{conf}")


def send_requests(port: int, count: int, tls: bool, host: str = HOST, headers: str = "") -> None:
    """`count` GET requests for `host` on keep-alive connections (with `tls`, HTTPS with SNI), each answered 200
    with a Content-Length; `headers`: more header lines, each ending with CRLF."""
    request = f"GET / HTTP/1.1\r\nHost: {host}\r\n{headers}\r\n".encode()
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    while count > 0:
        batch = min(count, REQUESTS_PER_CONNECTION)
        with socket.create_connection(("127.0.0.1", port)) as plain, \
                (context.wrap_socket(plain, server_hostname=host) if tls else plain) as connection:
            buffered = b""
            for _ in range(batch):
                connection.sendall(request)
                while True:
                    head_end = buffered.find(b"\r\n\r\n")
                    length = re.search(rb"(?i)\r\ncontent-length: (\d+)", buffered[:head_end]) if head_end >= 0 else None
                    if length and len(buffered) >= head_end + 4 + int(length[1]):
                        break
                    chunk = connection.recv(65536)
                    if not chunk:
                        raise SystemExit(f"port {port} closed the connection: {buffered[:200]!r}")
                    buffered += chunk
                if not buffered.startswith(b"HTTP/1.1 200"):
                    raise SystemExit(f"port {port} answered {buffered[:200]!r}")
                buffered = buffered[head_end + 4 + int(length[1]):]
        count -= batch


def count_instructions(name: str, conf: str, work: Path, warm: int, requests: int, tls: bool, host: str = HOST,
                       headers: str = "") -> Path:
    """Runs `conf` under callgrind; returns the profile of `requests` requests (send_requests: `host`, `headers`)
    after `warm` others."""
    directory = work / f"callgrind-{name}"
    directory.mkdir()
    os.chmod(directory, 0o755)
    port = free_port()
    (directory / "nginx.conf").write_text(single_process(conf, port, directory, tls))
    profile = directory / "callgrind.out"
    process = subprocess.Popen(["valgrind", "--tool=callgrind", "--smc-check=all-non-file",
                                f"--callgrind-out-file={profile}", "nginx", "-p", str(directory), "-c",
                                str(directory / "nginx.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, 120)  # valgrind starts nginx slowly
        send_requests(port, warm, tls, host, headers)
        subprocess.run(["callgrind_control", "--zero", str(process.pid)], check=True, capture_output=True)
        send_requests(port, requests, tls, host, headers)
        subprocess.run(["callgrind_control", "--dump", str(process.pid)], check=True, capture_output=True)
    finally:
        process.terminate()
        process.wait(60)
    return directory / "callgrind.out.1"  # the dump; callgrind.out is what ran after it


def total(profile: Path) -> int:
    return int(re.search(r"^(?:summary|totals): (\d+)", profile.read_text(errors="replace"), re.M)[1])


def inclusive(profile: Path) -> dict[str, int]:
    """Function name -> instructions it and what it called ran."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(profile)],
                         capture_output=True, text=True, check=True).stdout
    costs: dict[str, int] = {}
    for count, function in re.findall(r"^\s*([\d,]+) \([^)]*\)\s+\S*?:(\w+) ", out, re.M):
        costs.setdefault(function, int(count.replace(",", "")))
    return costs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", choices=("plain", "tls"), default="plain",
                        help="plain: one Ingress over HTTP; tls: the same over HTTPS")
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--warm", type=int, default=4000,
                        help="requests before counting: Lua's traces compiled, the metrics' lines seen")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        os.chmod(work, 0o755)
        scenario = Scenario(args.scenario, work)
        tls = scenario.certificate is not None
        backend_port = free_port()
        backend = start_ok_backend(work / "backend", backend_port)
        cluster = scenario_cluster(work / "manifests", backend_port, scenario)
        (work / "pyngress").mkdir()
        controller = Controller(work / "pyngress", [f"--manifests={cluster.directory}", "--log-level=warning",
                                                    "--configmap=ingress/quiet"])
        try:
            controller.start()
            url = scenario.url(controller.https_port if tls else controller.http_port)
            wait_for(lambda: answers(url), 30, what="pyngress answering 200")
            confs = {name: f"http {{ access_log off; {static_proxy(0, backend_port, headers, scenario)} }}\n"
                           "events { worker_connections 1024; }"
                     for name, headers in (("static", PLAIN_HEADERS), ("static+headers", FORWARDED_HEADERS))}
            confs["pyngress"] = controller.nginx_conf().decode()
            profiles = {name: count_instructions(name, conf, work, args.warm, args.requests, tls)
                        for name, conf in confs.items()}
        finally:
            controller.stop()
            stop_nginx(backend)
        per_request = {name: total(profile) / args.requests for name, profile in profiles.items()}
        costs = {name: inclusive(profile) for name, profile in profiles.items()}
        untimed = {name: (total(profile) - costs[name].get(TIMERS, 0)) / args.requests
                   for name, profile in profiles.items()}
        parts = costs["pyngress"]
    print(f"one {'TLS' if tls else 'plain'} Ingress: user-space instructions per request (callgrind, one process each, "
          f"{args.requests} requests after {args.warm})")
    for name, count in per_request.items():
        print(f"{name:16} {count:>9,.0f}   {count / per_request['static']:.2f}x static, "
              f"{count / per_request['static+headers']:.2f}x static+headers; without timers {untimed[name]:,.0f}, "
              f"{untimed[name] / untimed['static+headers']:.2f}x")
    print("pyngress, by part:")
    for label, function, minus in PARTS:
        count = (parts.get(function, 0) - (parts.get(minus, 0) if minus else 0)) / args.requests
        print(f"  {label:42} {count:>8,.0f}")


if __name__ == "__main__":
    main()
