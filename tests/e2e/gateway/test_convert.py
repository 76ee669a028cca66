"""`pyngress convert` on the e2e Ingress scenarios: the Gateway API resources it prints, served by the same
controller in place of the Ingresses, give the same answers to the same requests (same backends, same paths and
Host at the backend, same redirects, same headers), except for what its report names."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from tests.e2e.tls.pki import TestCA, https_get, tls_secret
from tests.support import k8s
from tests.support.net import wait_for

PREFIX = "nginx.ingress.kubernetes.io"
BACKENDS = ("CV-A", "CV-B", "CV-C", "CV-D", "CV-MAIN", "CV-CANARY")


def _ingress(name: str, host: str, *paths: tuple[str, str, str], annotations: dict[str, str] | None = None,
             **kwargs: Any) -> dict:
    return k8s.ingress(name, [k8s.rule(host, *((p, t, s, 80) for p, t, s in paths))],
                       annotations={f"{PREFIX}/{k}": v for k, v in (annotations or {}).items()}, **kwargs)


def ingresses() -> list[dict]:
    """The scenarios of tests/e2e/ingress/scenarios.py, and a case for each mapped annotation."""
    return [
        # matching_matrix, prefix_matches_whole_path_elements, two hosts, oldest_ingress_wins
        _ingress("matrix", "matrix.cv.example", ("/", "Exact", "cv-a"), ("/", "Prefix", "cv-b"),
                 ("/foo", "Exact", "cv-c"), ("/foo", "Prefix", "cv-d")),
        _ingress("prefix", "prefix.cv.example", ("/aaa", "Prefix", "cv-a")),
        k8s.ingress("two-hosts", [k8s.rule("one.cv.example", ("/", "Prefix", "cv-a", 80)),
                                  k8s.rule("two.cv.example", ("/", "Prefix", "cv-b", 80))]),
        _ingress("newer", "conflict.cv.example", ("/", "Prefix", "cv-b"), created="2024-06-01T00:00:00Z"),
        _ingress("older", "conflict.cv.example", ("/", "Prefix", "cv-a"), created="2023-01-01T00:00:00Z"),
        # rewrite-target: the prefix form, a fixed target, and captures that do not convert
        _ingress("rewrite", "rewrite.cv.example", ("/api(/|$)(.*)", "ImplementationSpecific", "cv-a"),
                 annotations={"rewrite-target": "/$2"}),
        _ingress("rewrite-fixed", "fixed.cv.example", ("/old", "Prefix", "cv-a"), annotations={"rewrite-target": "/new"}),
        _ingress("rewrite-captures", "captures.cv.example", ("/items/([0-9]+)", "ImplementationSpecific", "cv-a"),
                 annotations={"rewrite-target": "/item/$1"}),
        # use-regex
        _ingress("regex", "regex.cv.example", ("/items/[0-9]+", "ImplementationSpecific", "cv-a"),
                 ("/items", "ImplementationSpecific", "cv-b"), ("/exact", "Exact", "cv-c"),
                 annotations={"use-regex": "true"}),
        # redirects
        _ingress("moved", "moved.cv.example", ("/", "Prefix", "cv-a"),
                 annotations={"permanent-redirect": "https://target.cv.example/landing"}),
        _ingress("moved-307", "moved307.cv.example", ("/", "Prefix", "cv-a"),
                 annotations={"temporal-redirect": "http://target.cv.example:8080/t", "temporal-redirect-code": "307"}),
        _ingress("app-root", "approot.cv.example", ("/", "Prefix", "cv-a"), annotations={"app-root": "/app"}),
        _ingress("tls", "tls.cv.example", ("/", "Prefix", "cv-a"),
                 tls=[{"hosts": ["tls.cv.example"], "secretName": "cv-tls"}]),
        _ingress("tls-open", "tlsopen.cv.example", ("/", "Prefix", "cv-b"), annotations={"ssl-redirect": "false"},
                 tls=[{"hosts": ["tlsopen.cv.example"], "secretName": "cv-tls"}]),
        # canary by weight, by header, by header value
        _ingress("weighted", "weight.cv.example", ("/", "Prefix", "cv-main")),
        _ingress("weighted-canary", "weight.cv.example", ("/", "Prefix", "cv-canary"),
                 annotations={"canary": "true", "canary-weight": "50"}),
        _ingress("by-header", "header.cv.example", ("/", "Prefix", "cv-main")),
        _ingress("by-header-canary", "header.cv.example", ("/", "Prefix", "cv-canary"),
                 annotations={"canary": "true", "canary-by-header": "X-Canary"}),
        _ingress("by-value", "value.cv.example", ("/", "Prefix", "cv-main")),
        _ingress("by-value-canary", "value.cv.example", ("/", "Prefix", "cv-canary"),
                 annotations={"canary": "true", "canary-by-header": "X-Canary", "canary-by-header-value": "yes"}),
        # headers to the backend, its Host, and a timeout
        _ingress("headers", "headers.cv.example", ("/", "Prefix", "cv-a"),
                 annotations={"x-forwarded-prefix": "/pre", "upstream-vhost": "internal.cv.example",
                              "proxy-read-timeout": "1"}),
        # defaultBackend: the host's unmatched paths
        k8s.ingress("fallback", [k8s.rule("fallback.cv.example", ("/x", "Prefix", "cv-a", 80))],
                    default_backend=("cv-b", 80)),
    ]


@dataclass(frozen=True)
class Probe:
    host: str
    path: str
    headers: tuple[tuple[str, str], ...] = ()
    https: bool = False
    repeat: int = 1  # > 1: the set of backends that answer (weights)


def probe(host: str, path: str, *, https: bool = False, repeat: int = 1, **headers: str) -> Probe:
    return Probe(host, path, tuple((k.replace("_", "-"), v) for k, v in headers.items()), https, repeat)


PROBES = [
    *(probe("matrix.cv.example", p) for p in ("/", "/bar", "/foo", "/foo/bar", "/foobar")),
    *(probe("prefix.cv.example", p) for p in ("/aaa", "/aaa/", "/aaa/cccc", "/aaacccc")),
    probe("one.cv.example", "/"), probe("two.cv.example", "/x"), probe("unknown.cv.example", "/"),
    probe("conflict.cv.example", "/"),
    *(probe("rewrite.cv.example", p) for p in ("/api", "/api/", "/api/x/y?q=1", "/apix")),
    *(probe("fixed.cv.example", p) for p in ("/old", "/old/x", "/oldx", "/OLD/y")),
    *(probe("regex.cv.example", p) for p in ("/items/12", "/ITEMS/7/x", "/items/x", "/items", "/exact", "/exact/x")),
    probe("moved.cv.example", "/any/path"), probe("moved307.cv.example", "/"),
    probe("approot.cv.example", "/"), probe("approot.cv.example", "/app"), probe("approot.cv.example", "/x"),
    probe("tls.cv.example", "/a?b=c"), probe("tls.cv.example", "/a", https=True),
    probe("tlsopen.cv.example", "/a"), probe("tlsopen.cv.example", "/a", https=True),
    probe("weight.cv.example", "/", repeat=40),
    probe("header.cv.example", "/"), probe("header.cv.example", "/", X_Canary="always"),
    probe("header.cv.example", "/", X_Canary="never"), probe("header.cv.example", "/", X_Canary="other"),
    probe("value.cv.example", "/"), probe("value.cv.example", "/", X_Canary="yes"),
    probe("value.cv.example", "/", X_Canary="always"),
    probe("headers.cv.example", "/h"), probe("headers.cv.example", "/slow?pause=2"),
    probe("fallback.cv.example", "/x"), probe("fallback.cv.example", "/other"),
]


def _answer(stage, item: Probe) -> Any:
    """What a user sees of one request: status, backend, path and Host at the backend, the headers that the
    annotations set, the redirect's Location; an error's kind when the answer is cut."""
    headers = dict(item.headers)
    try:
        if item.https:
            got = https_get(stage.controller.https_port, item.host, item.path, headers=headers)
            status, response_headers, body = got.status, got.headers, got.body
        else:
            response = stage.controller.request("GET", item.path, item.host, headers=headers)
            status, response_headers, body = response.status_code, {k.lower(): v for k, v in response.headers.items()}, \
                response.content
    except (requests.RequestException, OSError) as err:
        return ("error", type(err).__name__)
    echoed = json.loads(body) if status == 200 and body.startswith(b"{") else {}
    at_backend = echoed.get("headers") or {}
    location = response_headers.get("location")
    if location:
        # The controller's ports stand for 80 and 443 here (the listeners' ports, which a Service maps to them): a
        # redirect to the listener's own port names the port nginx listens on.
        for port in (stage.controller.http_port, stage.controller.https_port):
            location = location.replace(f":{port}/", "/")
    return (status, echoed.get("backend"), echoed.get("path"), at_backend.get("host"),
            at_backend.get("x-forwarded-prefix"), location)


def _answers(stage, probes: list[Probe]) -> dict[Probe, Any]:
    found = {}
    for item in probes:
        if item.repeat > 1:
            found[item] = sorted({_answer(stage, item)[1] or "" for _ in range(item.repeat)})
        else:
            found[item] = _answer(stage, item)
    return found


def _settled(stage, probes: list[Probe], expected: dict[Probe, Any] | None, what: str) -> dict[Probe, Any]:
    """The answers once they stop changing (or equal `expected`)."""
    seen: list[dict[Probe, Any]] = [_answers(stage, probes)]

    def done() -> bool:
        seen.append(_answers(stage, probes))
        return seen[-1] == (expected if expected is not None else seen[-2])
    try:
        wait_for(done, 30, what=what, interval=0.5)
    except AssertionError:
        pass  # the comparison below shows the difference
    return seen[-1]


def _convert(directory: Path, objects: list[dict]) -> tuple[list[dict], list[str]]:
    source, report = directory / "ingresses.yaml", directory / "report.txt"
    source.write_text(yaml.safe_dump_all(objects))
    done = subprocess.run([sys.executable, "-m", "services.cli", "convert", "-f", str(source), "--report",
                           str(report)], capture_output=True, text=True, check=False)
    assert done.returncode in (0, 1), done.stderr
    return list(yaml.safe_load_all(done.stdout)), report.read_text().splitlines()


@pytest.fixture(scope="module")
def served(stage, tmp_path_factory):
    """The answers to PROBES from the Ingresses, then from the converted resources in their place."""
    work = tmp_path_factory.mktemp("convert")
    ca = TestCA(work)
    for name in BACKENDS:
        stage.cluster.apply(*stage.backend(name))
    stage.cluster.apply(tls_secret("cv-tls", ca.issue("tls.cv.example", ("tls.cv.example", "tlsopen.cv.example"))))
    objects = ingresses()
    stage.cluster.apply(*objects)
    stage.expect("fallback.cv.example", "/other", "CV-B", timeout=20)
    stage.controller.settled_reloads()  # the annotations that make location profiles are served after a reload
    from_ingresses = _settled(stage, PROBES, None, "the Ingresses' answers to settle")
    resources, report = _convert(work, objects)
    stage.cluster.delete(*objects)
    stage.cluster.apply(*resources)
    from_routes = _settled(stage, PROBES, from_ingresses, "the converted routes to answer as the Ingresses")
    return from_ingresses, from_routes, resources, report


def test_the_converted_routes_answer_as_the_ingresses(served):
    from_ingresses, from_routes, _, _ = served
    different = {f"{p.host}{p.path} {dict(p.headers) or ''}{' https' if p.https else ''}":
                 (from_ingresses[p], from_routes[p]) for p in PROBES if from_ingresses[p] != from_routes[p]}
    assert not different, "\n".join(f"{request}: Ingress {was}, route {now}" for request, (was, now) in different.items())
    # The probes did reach what they meant to.
    assert from_ingresses[probe("weight.cv.example", "/", repeat=40)] == ["CV-CANARY", "CV-MAIN"]
    assert from_ingresses[probe("rewrite.cv.example", "/api/x/y?q=1")][:3] == (200, "CV-A", "/x/y?q=1")
    assert from_ingresses[probe("tls.cv.example", "/a?b=c")][0] == 308
    assert from_ingresses[probe("tls.cv.example", "/a", https=True)][:2] == (200, "CV-A")
    assert from_ingresses[probe("headers.cv.example", "/h")] == (200, "CV-A", "/h", "internal.cv.example", "/pre", None)
    assert from_ingresses[probe("header.cv.example", "/", X_Canary="always")][1] == "CV-CANARY"


def test_what_does_not_convert_is_in_the_report(served):
    _, _, resources, report = served
    assert [line.split(": ", 1)[1] for line in report] == [
        "Ingress default/rewrite-captures: host captures.cv.example path /items/([0-9]+): not converted: "
        "rewrite-target /item/$1 takes capture groups of path /items/([0-9]+): an HTTPRoute rewrites a path prefix "
        "or the whole path only (the prefix form is path /app(/|$)(.*) with rewrite-target /$2)"]
    assert not [r for r in resources if r["kind"] == "HTTPRoute" and r["metadata"]["name"] == "rewrite-captures"]
