"""The ingress scenarios, written once against any cluster (manifests directory or Kubernetes API).

Each scenario takes a `Stage`: a running controller, the cluster it watches, and echo backends. Every
scenario uses its own host names, so several can share one controller.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from tests.support import k8s
from tests.support.controller import Controller, EchoBackends
from tests.support.net import wait_for


class Cluster(Protocol):
    def apply(self, *objects: dict) -> None: ...
    def delete(self, *objects: dict) -> None: ...


@dataclass
class Stage:
    controller: Controller
    cluster: Cluster
    echo: EchoBackends

    def backend(self, name: str, service: str | None = None, namespace: str = "default") -> list[dict]:
        """A Service named `service` (default: name) with the echo backend `name` as its one endpoint."""
        ip = self.echo.ips.get(name) or self.echo.start(name)
        service = service or name.lower()
        return [k8s.service(service, namespace=namespace),
                k8s.endpoint_slice(service, [ip], self.echo.port, namespace=namespace)]

    def served_by(self, host: str, path: str) -> str:
        resp = self.controller.get(path, host)
        return resp.json()["backend"] if resp.status_code == 200 else str(resp.status_code)

    def expect(self, host: str, path: str, want: str, timeout: float = 10.0) -> None:
        """Wait until `host` + `path` is answered by backend `want` (or with status code `want`)."""
        wait_for(lambda: self.served_by(host, path) == want, timeout,
                 what=f"{host}{path} → {want} (now {self.served_by(host, path)})")


def matching_matrix(stage: Stage) -> None:
    host = "matrix.example.com"
    for name in "ABCD":
        stage.cluster.apply(*stage.backend(name))
    stage.cluster.apply(k8s.ingress("matrix", [k8s.rule(
        host, ("/", "Exact", "a", 80), ("/", "Prefix", "b", 80),
        ("/foo", "Exact", "c", 80), ("/foo", "Prefix", "d", 80))]))
    stage.expect(host, "/", "A")
    for path, want in (("/", "A"), ("/bar", "B"), ("/foo", "C"), ("/foo/bar", "D"), ("/foobar", "B")):
        assert stage.served_by(host, path) == want, f"{path} should reach {want}"


def prefix_matches_whole_path_elements(stage: Stage) -> None:
    host = "prefix.example.com"
    stage.cluster.apply(*stage.backend("P"))
    stage.cluster.apply(k8s.ingress("prefix", [k8s.rule(host, ("/aaa", "Prefix", "p", 80))]))
    stage.expect(host, "/aaa", "P")
    for path in ("/aaa", "/aaa/", "/aaa/cccc"):
        assert stage.controller.get(path, host).status_code == 200, path
    assert stage.controller.get("/aaacccc", host).status_code == 404


def hosts_unknown_host_and_missing_service(stage: Stage) -> None:
    stage.cluster.apply(*stage.backend("H1"), *stage.backend("H2"))
    stage.cluster.apply(
        k8s.ingress("two-hosts", [k8s.rule("one.example.com", ("/", "Prefix", "h1", 80)),
                                  k8s.rule("two.example.com", ("/", "Prefix", "h2", 80))]),
        k8s.ingress("missing-svc", [k8s.rule("missing.example.com", ("/", "Prefix", "does-not-exist", 80))]))
    stage.expect("one.example.com", "/", "H1")
    stage.expect("two.example.com", "/x", "H2")
    stage.expect("missing.example.com", "/", "503")
    assert stage.controller.get("/", "unknown.example.com").status_code == 404


def oldest_ingress_wins(stage: Stage) -> None:
    host = "conflict.example.com"
    stage.cluster.apply(*stage.backend("OLD"), *stage.backend("NEW"))
    stage.cluster.apply(
        k8s.ingress("newer", [k8s.rule(host, ("/", "Prefix", "new", 80))], created="2024-06-01T00:00:00Z"),
        k8s.ingress("older", [k8s.rule(host, ("/", "Prefix", "old", 80))], created="2023-01-01T00:00:00Z"))
    stage.expect(host, "/", "OLD")


def endpoints_change_without_reload(stage: Stage) -> None:
    """Scale 1 → 2 → 0 by editing the EndpointSlice: traffic follows, nginx.conf and reloads do not move."""
    host = "scale.example.com"
    ip1 = stage.echo.ips.get("S1") or stage.echo.start("S1")
    ip2 = stage.echo.ips.get("S2") or stage.echo.start("S2")
    stage.cluster.apply(k8s.service("scaled"), k8s.endpoint_slice("scaled", [ip1], stage.echo.port))
    stage.cluster.apply(k8s.ingress("scaled", [k8s.rule(host, ("/", "Prefix", "scaled", 80))]))
    stage.expect(host, "/", "S1")
    conf = stage.controller.nginx_conf()
    reloads = stage.controller.metric("nginx_ingress_controller_success")

    stage.cluster.apply(k8s.endpoint_slice("scaled", [ip1, ip2], stage.echo.port))
    wait_for(lambda: {stage.served_by(host, "/") for _ in range(6)} == {"S1", "S2"}, 10,
             what="both endpoints answering")
    stage.cluster.apply(k8s.endpoint_slice("scaled", [], stage.echo.port))
    stage.expect(host, "/", "503")

    assert stage.controller.nginx_conf() == conf
    assert stage.controller.metric("nginx_ingress_controller_success") == reloads


def bad_input_leaves_other_routes_working(stage: Stage, write_broken_file) -> None:
    host = "sturdy.example.com"
    stage.cluster.apply(*stage.backend("GOOD"))
    stage.cluster.apply(k8s.ingress("sturdy", [k8s.rule(host, ("/", "Prefix", "good", 80))]))
    stage.expect(host, "/", "GOOD")
    write_broken_file()
    stage.cluster.apply(k8s.ingress("dangling", [k8s.rule("dangling.example.com", ("/", "Prefix", "nope", 80))]))
    stage.expect("dangling.example.com", "/", "503")
    assert stage.served_by(host, "/") == "GOOD"
    # A later good change is still picked up.
    stage.cluster.apply(*stage.backend("LATER"))
    stage.cluster.apply(k8s.ingress("later", [k8s.rule("later.example.com", ("/", "Prefix", "later", 80))]))
    stage.expect("later.example.com", "/", "LATER")


def ingress_class_matrix(stage: Stage, watch_without_class: bool) -> None:
    """Which Ingresses this controller serves, by ingressClassName, legacy annotation, or neither."""
    stage.cluster.apply(*stage.backend("CLS"))
    stage.cluster.apply(k8s.ingress_class("nginx"), k8s.ingress_class("other", "example.com/other-controller"))
    cases = {
        "by-class-name": (dict(class_name="nginx"), True),
        "other-class": (dict(class_name="other"), False),
        "missing-class": (dict(class_name="no-such-class"), False),
        "legacy-annotation": (dict(class_name=None, annotations={"kubernetes.io/ingress.class": "nginx"}), True),
        "legacy-other": (dict(class_name=None, annotations={"kubernetes.io/ingress.class": "traefik"}), False),
        "no-class": (dict(class_name=None), watch_without_class),
    }
    # Ingresses that must not be served go first: once the last one written is served, the controller has
    # seen every earlier one too (files are read oldest first; API events arrive in order).
    ordered = sorted(cases.items(), key=lambda case: case[1][1])
    for name, (kwargs, _) in ordered:
        stage.cluster.apply(k8s.ingress(f"class-{name}", [k8s.rule(f"{name}.class.example.com",
                                                                    ("/", "Prefix", "cls", 80))], **kwargs))
    stage.expect(f"{ordered[-1][0]}.class.example.com", "/", "CLS")
    for name, (_, served) in cases.items():
        assert stage.served_by(f"{name}.class.example.com", "/") == ("CLS" if served else "404"), name
