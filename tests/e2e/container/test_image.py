"""The container image: `make image` builds the root Dockerfile, podman runs it on host networking.

What a user of the image relies on: it serves the demo manifests (examples/manifests, mounted) to echo
backends on the host's loopback, /healthz answers, a SIGKILLed nginx master inside the container is
replaced by supervisord (PID 1), and `podman stop` lets an in-flight slow request finish before the
container exits 0. Run as root (the image's default), as one non-root user without capabilities, and
under the security context of the install manifests (deploy/pyngress.yaml).

Podman here needs runc and a containers.conf without default ulimits; `make image` installs podman, runc
and mmdebstrap when missing, writes that containers.conf and makes the bookworm base image with mmdebstrap
(no registry is reachable). The base image is kept for later runs; every other image and container this
module creates is removed at the end.
"""
from __future__ import annotations

import base64
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import kubernetes.client
import pytest
import requests
import yaml

from services.tools import install_manifests
from tests.e2e.tls.pki import TestCA
from tests.kube_api import KubeApiServer
from tests.support import k8s as factories
from tests.support.ingress_nginx_deploy import CLOUD_DEPLOY_COMMAND, POD_ENV
from tests.support.kube_cluster import ApiCluster
from tests.support.net import free_port, wait_for

REPO = Path(__file__).resolve().parents[3]
CONTAINERS_CONF = REPO / "build" / "image" / "containers.conf"
ECHO_BACKEND = REPO / "examples" / "echo_backend.py"
DEPLOY_MANIFEST = REPO / "deploy" / "pyngress.yaml"
# The slow request outlives the start of `podman stop` by this much; nginx must let it finish.
SLOW_SECONDS = 4.0
SLOW_BODY = b"slow-and-complete\n" * 4096  # 72 KiB: more than one write, so a cut response shows

pytestmark = [
    pytest.mark.long_file,
    pytest.mark.timeout(600),  # a cold build (base image, apt, wheels) takes about a minute here
    pytest.mark.skipif(os.geteuid() != 0, reason="podman runs containers here as root only"),
]


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CONTAINERS_CONF=str(CONTAINERS_CONF))
    result = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def image_ids() -> set[str]:
    return set(podman("images", "--all", "--quiet", "--no-trunc").stdout.split())


def make(target: str, log: Path, *variables: str) -> None:
    with open(log, "ab") as out:
        result = subprocess.run(["make", "--no-print-directory", target, *variables], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, timeout=480)
    if result.returncode != 0:
        raise AssertionError(f"make {target} failed; the end of {log}:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> Iterator[str]:
    """The image built from the working tree under a tag of its own; removed afterwards with every
    intermediate image its build made (not the base image, not layers that were already cached)."""
    log = tmp_path_factory.mktemp("image") / "make-image.log"
    make("image-base", log)  # installs podman, runc and mmdebstrap if missing; the base image when missing
    before = image_ids()
    tag = f"localhost/pyngress-e2e:{uuid.uuid4().hex[:8]}"
    try:
        started = time.monotonic()
        make("image", log, f"IMAGE={tag}")
        print(f"make image: {time.monotonic() - started:.1f} s")
        yield tag
    finally:
        podman("rmi", "--force", tag, check=False)
        created = image_ids() - before
        if created:
            podman("rmi", "--force", *created, check=False)


class SlowBackend:
    """An HTTP backend on the host's loopback: /slow answers after SLOW_SECONDS, anything else at once."""

    def __init__(self) -> None:
        self.port = free_port()
        self.arrived = threading.Event()
        backend = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # noqa: N802 - the base class's name
                body = b"ready\n"
                if self.path.startswith("/slow"):
                    backend.arrived.set()
                    time.sleep(SLOW_SECONDS)
                    body = SLOW_BODY
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class Backends:
    """The demo's two echo backends (on free ports instead of 9001/9002) and the slow one."""
    echo_ports: dict[str, int]
    slow: SlowBackend
    procs: list[subprocess.Popen] = field(default_factory=list)


@pytest.fixture(scope="module")
def backends() -> Iterator[Backends]:
    ports = {"echo-a": free_port(), "echo-b": free_port()}
    found = Backends(ports, SlowBackend())
    for name, port in ports.items():
        found.procs.append(subprocess.Popen(
            [sys.executable, str(ECHO_BACKEND), "--name", name, "--port", str(port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_for(lambda: requests.get(f"http://127.0.0.1:{port}/", timeout=1).ok, 10, what=f"{name} up")
    yield found
    for proc in found.procs:
        proc.kill()
        proc.wait()
    found.slow.stop()


SLOW_MANIFEST = """\
apiVersion: v1
kind: Service
metadata: {{name: slow, namespace: demo}}
spec:
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {{name: slow-1, namespace: demo, labels: {{kubernetes.io/service-name: slow}}}}
addressType: IPv4
ports: [{{name: http, port: {port}, protocol: TCP}}]
endpoints: [{{addresses: ["127.0.0.1"], conditions: {{ready: true}}}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: slow, namespace: demo}}
spec:
  ingressClassName: nginx
  rules:
    - host: slow.local
      http:
        paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: slow, port: {{number: 80}}}}}}}}]
"""


@pytest.fixture(scope="module")
def manifests(tmp_path_factory, backends: Backends) -> Path:
    """examples/manifests as the container sees it: the demo's backend ports moved to the free ones the
    echo backends listen on (with host networking, 9001 may be taken), plus the slow backend's Ingress."""
    directory = tmp_path_factory.mktemp("manifests")
    for source in (REPO / "examples" / "manifests").glob("*.yaml"):
        text = source.read_text()
        for name, default in (("echo-a", 9001), ("echo-b", 9002)):
            assert str(default) in text, f"the demo no longer uses port {default} for {name}: update this test"
            text = text.replace(str(default), str(backends.echo_ports[name]))
        (directory / source.name).write_text(text)
    (directory / "slow.yaml").write_text(SLOW_MANIFEST.format(port=backends.slow.port))
    # Readable by a container run as another user (pytest makes its temporary directories 0700).
    directory.chmod(0o755)
    for path in directory.iterdir():
        path.chmod(0o644)
    return directory


@dataclass(frozen=True)
class RunMode:
    """How the container is run: podman flags beyond the shared ones, and where pyngress keeps its run dir."""
    name: str
    run_args: tuple[str, ...] = ()
    run_dir: str = "/var/run/pyngress"
    uid: int = 0

    @property
    def user(self) -> str:
        """The user podman top shows for supervisord and everything but nginx's workers."""
        return "root" if self.uid == 0 else str(self.uid)  # the image's passwd has no entry for other uids

    @property
    def worker_user(self) -> str:
        return "nobody" if self.uid == 0 else self.user  # nginx drops to nobody only when started as root


AS_ROOT = RunMode("root")
AS_ROOT_WITH_PTRACE = RunMode("root-with-SYS_PTRACE", ("--cap-add=SYS_PTRACE",))
# ingress-nginx's user and group, no capability, nothing writable but the run and state directories and /tmp.
AS_NON_ROOT = RunMode("non-root", (
    "--user=101:82", "--cap-drop=ALL", "--read-only", "--security-opt=no-new-privileges",
    "--tmpfs=/var/run/pyngress", "--tmpfs=/var/lib/pyngress", "--tmpfs=/tmp",
    # The run dir must be the user's own (pyngress refuses another's): a directory it makes in the tmpfs.
    "--env=PYNGRESS_RUN_DIR=/var/run/pyngress/controller"), run_dir="/var/run/pyngress/controller", uid=101)


def install_manifests_mode() -> RunMode | None:
    """The controller Deployment's security context in deploy/pyngress.yaml, as podman flags: its user and
    group, dropped and added capabilities, read-only root, no privilege escalation, its emptyDirs (tmpfs)
    and plain env values. Its sysctl (unprivileged ports from 0) cannot be set on host networking; the
    test's ports are above 1024 anyway."""
    if not DEPLOY_MANIFEST.exists():
        return None
    deployment = next(d for d in yaml.safe_load_all(DEPLOY_MANIFEST.read_text()) if d and d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    controller = pod["containers"][0]
    pod_context, context = pod.get("securityContext", {}), controller.get("securityContext", {})
    args: list[str] = []
    user = context.get("runAsUser", pod_context.get("runAsUser"))
    group = context.get("runAsGroup", pod_context.get("runAsGroup"))
    if user is not None:
        args.append(f"--user={user}" + (f":{group}" if group is not None else ""))
    capabilities = context.get("capabilities", {})
    args += [f"--cap-drop={c}" for c in capabilities.get("drop", [])]
    args += [f"--cap-add={c}" for c in capabilities.get("add", [])]
    if context.get("readOnlyRootFilesystem"):
        args.append("--read-only")
    if context.get("allowPrivilegeEscalation") is False:
        args.append("--security-opt=no-new-privileges")
    empty_dirs = {v["name"] for v in pod.get("volumes", []) if "emptyDir" in v}
    args += [f"--tmpfs={m['mountPath']}" for m in controller.get("volumeMounts", []) if m["name"] in empty_dirs]
    env = {e["name"]: e["value"] for e in controller.get("env", []) if "value" in e}
    args += [f"--env={name}={value}" for name, value in env.items()]
    return RunMode("install-manifests", tuple(args), env.get("PYNGRESS_RUN_DIR", AS_ROOT.run_dir), int(user or 0))


AS_INSTALLED = install_manifests_mode()
NEEDS_INSTALL_MANIFESTS = pytest.mark.skipif(AS_INSTALLED is None, reason=f"{DEPLOY_MANIFEST} does not exist yet")


class Container:
    """One `podman run -d --network host` of the image, on free ports; `remove()` deletes it."""

    def __init__(self, image: str, manifests: Path, mode: RunMode = AS_ROOT,
                 entrypoint_args: tuple[str, ...] = (), env: dict[str, str] | None = None,
                 source: tuple[str, ...] = ("--manifests=/manifests",), volumes: tuple[str, ...] = ()) -> None:
        """`source`: where the objects come from; `volumes`: more podman --volume values."""
        self.name = f"pyngress-e2e-{uuid.uuid4().hex[:8]}"
        self.mode = mode
        self.http_port, self.https_port, self.healthz_port = free_port(), free_port(), free_port()
        podman("run", "--detach", "--name", self.name, "--network", "host", "--pull=never",
               "--volume", f"{manifests}:/manifests:ro", *(f"--volume={v}" for v in volumes), *mode.run_args,
               *(f"--env={name}={value}" for name, value in (env or {}).items()), image, *entrypoint_args,
               *source, f"--http-port={self.http_port}", f"--https-port={self.https_port}",
               f"--healthz-port={self.healthz_port}", f"--status-port={free_port()}",
               f"--ssl-passthrough-proxy-port={free_port()}")

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return (result.stdout + result.stderr)[-4000:]

    def wait_healthy(self, timeout: float = 60) -> None:
        try:
            wait_for(lambda: requests.get(f"http://127.0.0.1:{self.healthz_port}/healthz", timeout=2).status_code
                     == 200, timeout, interval=0.2, what="/healthz 200")
        except AssertionError as err:
            raise AssertionError(f"{err}\ncontainer log:\n{self.logs()}") from None

    def get(self, host: str, path: str, timeout: float = 5) -> requests.Response:
        return requests.get(f"http://127.0.0.1:{self.http_port}{path}", headers={"Host": host}, timeout=timeout)

    def served_by(self, host: str, path: str) -> str | None:
        response = self.get(host, path)
        return response.json().get("backend") if response.status_code == 200 else None

    def exec(self, script: str) -> str:
        """A shell command inside the container (the image has no procps: `kill` is the shell's)."""
        return podman("exec", self.name, "sh", "-c", script).stdout

    def processes(self) -> list[dict[str, str]]:
        """The container's processes as podman sees them: user, pid, ppid, state, args."""
        lines = podman("top", self.name, "user", "pid", "ppid", "state", "args").stdout.splitlines()[1:]
        return [dict(zip(("user", "pid", "ppid", "state", "args"), line.split(None, 4))) for line in lines]

    def nginx_master(self) -> int:
        return int(self.exec(f"cat {self.mode.run_dir}/nginx.pid"))

    def state(self) -> tuple[str, int]:
        out = podman("inspect", self.name, "--format", "{{.State.Status}} {{.State.ExitCode}}").stdout.split()
        return out[0], int(out[1])

    def remove(self) -> None:
        podman("rm", "--force", "--time", "0", self.name, check=False)


@pytest.fixture(scope="module")
def container(image: str, manifests: Path, backends: Backends) -> Iterator[Container]:
    started = Container(image, manifests)
    try:
        started.wait_healthy()
        yield started
    finally:
        started.remove()


def _demo_routes_answer(container: Container) -> bool:
    return container.served_by("demo.local", "/") == "echo-a" and container.served_by("demo.local", "/b/x") == "echo-b"


def wait_for_demo_routes(container: Container, what: str = "the demo's routes") -> None:
    try:
        wait_for(lambda: _demo_routes_answer(container), 10, interval=0.2, what=what)
    except AssertionError as err:
        raise AssertionError(f"{err}\ncontainer log:\n{container.logs()}") from None


def _users(container: Container) -> dict[str, set[str]]:
    """Which users run supervisord (PID 1), the nginx master, its workers and the Python services."""
    kinds: dict[str, set[str]] = {"supervisord": set(), "nginx master": set(), "nginx worker": set(), "services": set()}
    for p in container.processes():
        kind = ("supervisord" if p["pid"] == "1" else "nginx master" if p["args"].startswith("nginx: master")
                else "nginx worker" if p["args"].startswith("nginx: worker") else "services")
        kinds[kind].add(p["user"])
    return kinds


def _expected_users(mode: RunMode) -> dict[str, set[str]]:
    return {"supervisord": {mode.user}, "nginx master": {mode.user}, "nginx worker": {mode.worker_user},
            "services": {mode.user}}


def test_serves_the_demo_and_healthz(container: Container) -> None:
    assert requests.get(f"http://127.0.0.1:{container.healthz_port}/healthz", timeout=2).status_code == 200
    wait_for_demo_routes(container)
    pid1 = next(p for p in container.processes() if p["pid"] == "1")
    assert "supervisord" in pid1["args"], f"PID 1 is not supervisord: {pid1}"
    # As root (the image's default user), only nginx's workers, which serve every request, drop to nobody.
    assert _users(container) == _expected_users(AS_ROOT)


def test_runs_as_one_non_root_user(image: str, manifests: Path, backends: Backends) -> None:
    """The ingress tree runs whole as a non-root user without capabilities on a read-only root filesystem."""
    non_root = Container(image, manifests, AS_NON_ROOT)
    try:
        non_root.wait_healthy()
        wait_for_demo_routes(non_root)
        assert _users(non_root) == _expected_users(AS_NON_ROOT)
    finally:
        non_root.remove()


@NEEDS_INSTALL_MANIFESTS
def test_runs_under_the_install_manifests_security_context(image: str, manifests: Path, backends: Backends) -> None:
    """The image works under deploy/pyngress.yaml's security context (its user, capabilities, read-only root
    filesystem, emptyDirs), and each process runs as the user it should: nginx's workers never as root."""
    assert AS_INSTALLED is not None
    installed = Container(image, manifests, AS_INSTALLED)
    try:
        installed.wait_healthy()
        wait_for_demo_routes(installed)
        assert _users(installed) == _expected_users(AS_INSTALLED), f"podman flags: {AS_INSTALLED.run_args}"
    finally:
        installed.remove()


# Run as root, nginx's workers run as nobody. Without CAP_SYS_PTRACE (not in podman's, docker's or
# Kubernetes' default capabilities), root cannot readlink /proc/<pid>/exe or cwd of another user's process:
# the launcher then finds the killed master's orphaned workers by the process group its pid file names
# (services/nginxconf/processes.py). Each mode below must recover.
@pytest.mark.parametrize("mode", [
    pytest.param(AS_ROOT, id=AS_ROOT.name),
    pytest.param(AS_ROOT_WITH_PTRACE, id=AS_ROOT_WITH_PTRACE.name),
    pytest.param(AS_NON_ROOT, id=AS_NON_ROOT.name),
    pytest.param(AS_INSTALLED, id="install-manifests", marks=NEEDS_INSTALL_MANIFESTS),
])
def test_killed_nginx_master_is_replaced_by_supervisord(image: str, manifests: Path, backends: Backends,
                                                        mode: RunMode) -> None:
    killed = Container(image, manifests, mode)
    try:
        killed.wait_healthy()
        wait_for_demo_routes(killed)
        old_master = killed.nginx_master()
        killed.exec(f"kill -9 {old_master}")

        def replaced() -> bool:
            processes = killed.processes()
            masters = [int(p["pid"]) for p in processes if p["args"].startswith("nginx: master process")]
            workers = [p for p in processes if p["args"].startswith("nginx: worker process")]
            # Recovered: one new master, and every worker is its child (the killed master's orphans are gone).
            return (len(masters) == 1 and masters[0] != old_master and bool(workers)
                    and all(int(p["ppid"]) == masters[0] for p in workers))

        try:
            wait_for(replaced, 15, interval=0.2, what="a new nginx master with only its own workers")
        except AssertionError as err:
            raise AssertionError(f"{err}\nprocesses: {killed.processes()}\ncontainer log:\n{killed.logs()}") from None
        wait_for_demo_routes(killed, "the demo's routes after the restart")
        # supervisord, as PID 1, reaps what the killed master left (its workers' exits): no zombie stays.
        wait_for(lambda: not [p for p in killed.processes() if p["state"] == "Z"], 5, what="no zombie processes")
    finally:
        killed.remove()


@pytest.mark.parametrize("mode", [
    pytest.param(AS_ROOT, id=AS_ROOT.name),
    pytest.param(AS_INSTALLED, id="install-manifests", marks=NEEDS_INSTALL_MANIFESTS),
])
def test_stop_drains_an_in_flight_request_and_exits_0(image: str, manifests: Path, backends: Backends,
                                                      mode: RunMode) -> None:
    stopping = Container(image, manifests, mode)
    try:
        stopping.wait_healthy()
        wait_for(lambda: stopping.get("slow.local", "/ready").text == "ready\n", 10, what="the slow route")
        backends.slow.arrived.clear()
        result: dict[str, object] = {}

        def slow_request() -> None:
            try:
                result["response"] = stopping.get("slow.local", "/slow", timeout=SLOW_SECONDS + 30)
            except Exception as err:  # reported below with the container's log
                result["error"] = err

        client = threading.Thread(target=slow_request)
        client.start()
        assert backends.slow.arrived.wait(10), "the slow request never reached its backend"
        started = time.monotonic()
        podman("stop", "--time", "60", stopping.name, timeout=90)
        took = time.monotonic() - started
        client.join(SLOW_SECONDS + 30)
        response = result.get("response")
        assert isinstance(response, requests.Response), \
            f"the in-flight request failed: {result.get('error')!r}\ncontainer log:\n{stopping.logs()}"
        assert response.status_code == 200 and response.content == SLOW_BODY, \
            f"the in-flight request was cut: {response.status_code}, {len(response.content)} bytes"
        assert stopping.state() == ("exited", 0), f"{stopping.state()}\ncontainer log:\n{stopping.logs()}"
        # It waited for the request, and not for podman's SIGKILL (60 s) nor supervisord's (30 s for nginx).
        assert SLOW_SECONDS - 1 < took < 30, f"podman stop took {took:.1f} s"
        with pytest.raises(requests.ConnectionError):
            stopping.get("demo.local", "/", timeout=2)
    finally:
        stopping.remove()


def test_static_cni_plugin_is_installed_and_runs(image: str) -> None:
    """The static CNI plugin sits where the CNI DaemonSet's init container takes it from, and runs; the
    entrypoint runs a command given instead of flags."""
    result = podman("run", "--rm", "--network", "none", "--env", "CNI_COMMAND=VERSION", image,
                    "/usr/lib/pyngress/cni/pyngress-cni")
    assert "supportedVersions" in json.loads(result.stdout), result.stdout


def test_ingress_nginx_entrypoint_and_pre_stop_hook(image: str, manifests: Path, backends: Backends) -> None:
    """An ingress-nginx Deployment (cloud deploy.yaml, or the Helm chart's defaults: the same args) runs
    `/nginx-ingress-controller ARGS` in the container, and its preStop hook runs /wait-shutdown: that stops the
    tree and returns 0 once it has."""
    wrapped = Container(image, manifests, entrypoint_args=tuple(CLOUD_DEPLOY_COMMAND), env=POD_ENV)
    try:
        wrapped.wait_healthy()
        wait_for_demo_routes(wrapped)
        hook = podman("exec", wrapped.name, "/wait-shutdown", check=False, timeout=60)
        assert hook.returncode in (0, 137), hook  # 137: podman's exec ends with the container it waited on
        wait_for(lambda: wrapped.state()[0] == "exited", 30, what="the container to stop")
        assert wrapped.state() == ("exited", 0)
    finally:
        wrapped.remove()


def test_ingress_nginx_chart_defaults_run_the_webhook_the_api_server_calls(image: str, manifests: Path,
                                                                          backends: Backends, tmp_path: Path) -> None:
    """The chart's defaults (`/nginx-ingress-controller` with --validating-webhook=:8443 and the certificate of its
    Secret at /usr/local/certificates), watching the API test server on the host: the API server calls the webhook
    in the container with the configuration's caBundle; an Ingress is admitted and served, a snippet refused with
    the webhook's message. The port is a free one instead of 8443 (host networking)."""
    namespace, service = POD_ENV["POD_NAMESPACE"], "ingress-nginx-controller-admission"
    port = free_port()
    ca = TestCA(tmp_path)
    pair = ca.issue(f"{service}.{namespace}.svc", (f"{service}.{namespace}.svc",))
    certificates = tmp_path / "certificates"
    certificates.mkdir()
    (certificates / "cert").write_text(pair.cert)
    (certificates / "key").write_text(pair.key)
    with KubeApiServer() as api:
        kube = tmp_path / "kube"
        kube.mkdir()
        api.write_kubeconfig(kube / "kubeconfig")
        api_client = kubernetes.client.ApiClient(api.configuration())
        cluster = ApiCluster(api_client)
        cluster.apply(factories.ingress_class("nginx"),
                      factories.service(service, 443, namespace=namespace, port_name="https-webhook"),
                      factories.endpoint_slice(service, ["127.0.0.1"], port, namespace=namespace,
                                               port_name="https-webhook"),
                      factories.service("echo-a", 80),
                      factories.endpoint_slice("echo-a", ["127.0.0.1"], backends.echo_ports["echo-a"]))
        configuration = install_manifests.validating_webhook_configuration(install_manifests.Options(
            namespace=namespace))
        webhook = configuration["webhooks"][0]
        webhook["clientConfig"]["service"]["name"] = service
        webhook["clientConfig"]["caBundle"] = base64.b64encode(ca.cert_path.read_bytes()).decode()
        kubernetes.client.AdmissionregistrationV1Api(api_client).create_validating_webhook_configuration(configuration)
        wrapped = Container(image, manifests, entrypoint_args=(*CLOUD_DEPLOY_COMMAND, f"--validating-webhook=:{port}"),
                            env=POD_ENV, source=("--kubeconfig=/kube/kubeconfig",),
                            volumes=(f"{certificates}:/usr/local/certificates:ro", f"{kube}:/kube:ro"))
        try:
            wrapped.wait_healthy()
            networking = kubernetes.client.NetworkingV1Api(api_client)
            admitted = factories.ingress("admitted", [factories.rule("admitted.local", ("/", "Prefix", "echo-a", 80))])
            wait_for(lambda: _created(networking, admitted), 30, what="the webhook admitting an Ingress")
            wait_for(lambda: wrapped.served_by("admitted.local", "/") == "echo-a", 15, what="the Ingress served")
            refused = factories.ingress("refused", [factories.rule("refused.local", ("/", "Prefix", "echo-a", 80))],
                                        annotations={"nginx.ingress.kubernetes.io/server-snippet": "return 200;"})
            with pytest.raises(kubernetes.client.ApiException) as denied:
                networking.create_namespaced_ingress("default", refused)
            message = json.loads(denied.value.body)["message"]
            assert denied.value.status == 400, message
            assert message.startswith('admission webhook "validate.nginx.ingress.kubernetes.io" denied the request: ')
            assert "server-snippet" in message and api.admission_calls >= 2
        except BaseException:
            print(wrapped.logs())
            raise
        finally:
            wrapped.remove()
            api_client.close()


def _created(networking: "kubernetes.client.NetworkingV1Api", ingress: dict) -> bool:
    """Create `ingress`; False while the webhook does not answer yet (the API server's 500)."""
    try:
        networking.create_namespaced_ingress("default", ingress)
    except kubernetes.client.ApiException as err:
        if err.status != 500:
            raise
        return False
    return True
