"""The work one Ingress change costs the incremental model does not grow with the cluster: the lines of Python it
runs are counted (sys.settrace) for the same change at N and at 2N Ingresses, a tenth of them with TLS."""
from __future__ import annotations

import base64
import collections
import sys
from typing import Any

from services.common.objects import object_key
from services.common.settings import Settings
from services.nginxconf.prefix import make_self_signed
from services.syncer.model.incremental import IncrementalModel
from tests.support import k8s

PEM = make_self_signed("/CN=tls.example", ("*.tls.example",)).decode()
CERT_END = PEM.index("-----END CERTIFICATE-----") + len("-----END CERTIFICATE-----\n")


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].update(uid=f"uid-{obj['kind']}-{obj['metadata']['name']}", resourceVersion="1",
                           creationTimestamp="2026-01-01T00:00:00Z")
    return obj


def _store(n: int) -> dict[str, dict[str, Any]]:
    objects = [k8s.ingress_class("nginx")]
    for i in range(n):
        tls = None
        objects += [k8s.service(f"s{i}"), k8s.endpoint_slice(f"s{i}", ["10.0.0.1"], 8080)]
        if i % 10 == 0:
            # Each Secret its own base64 text, as each holds its own certificate.
            objects.append(k8s.secret(f"tls{i}", {"tls.crt": PEM[:CERT_END], "tls.key": PEM[CERT_END:] + "\n" * i},
                                      "kubernetes.io/tls"))
            tls = [{"hosts": [f"h{i}.tls.example"], "secretName": f"tls{i}"}]
        objects.append(k8s.ingress(f"i{i}", [k8s.rule(f"h{i}.tls.example", ("/", "Prefix", f"s{i}", 80))], tls=tls))
    return {object_key(obj): _stored(obj) for obj in objects}


def _lines_of_one_change(n: int) -> collections.Counter[str]:
    """Lines run per file to take one new Ingress (no TLS) into a model of `n` Ingresses."""
    store = _store(n)
    model = IncrementalModel(Settings())
    model.update(store, None, refused_profiles={}, previous_configmap={})
    new = _stored(k8s.ingress("new", [k8s.rule("new.example", ("/", "Prefix", "s0", 80))]))
    store[object_key(new)] = new
    lines: collections.Counter[str] = collections.Counter()

    def trace(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            lines[frame.f_code.co_filename] += 1
        return trace
    sys.settrace(trace)
    try:
        built = model.update(store, {object_key(new)}, refused_profiles={}, previous_configmap={})
    finally:
        sys.settrace(None)
    assert "new.example" in built.routes and len(built.certificates["certs"]) == (n + 9) // 10
    return lines


def test_one_ingress_change_runs_the_same_python_at_any_cluster_size():
    small, large = _lines_of_one_change(40), _lines_of_one_change(80)
    assert large[base64.__file__] == 0  # no certificate decoded again
    grown = {name: (small[name], count) for name, count in large.items() if count != small[name]}
    assert grown == {}
