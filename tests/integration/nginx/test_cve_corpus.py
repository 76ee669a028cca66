"""ingress-nginx's configuration-injection advisories (tests/support/cve_corpus.py) against the model, the
renderer and the real `nginx -t`: each payload's Ingress is refused or its value stays inert (read back as
nginx reads it, nginx.conf holds it only as the arguments it was meant to be), `nginx -t` accepts the
result, and the other tenant's Ingress keeps its route."""
from __future__ import annotations

from typing import Iterator

import pytest

from services.nginxconf.render import render
from tests.support.cve_corpus import FILE_DIRECTIVES, LEAK_DIR, PAYLOADS, Payload
from tests.support.injection_check import assert_values_stay_arguments
from tests.support.model_cluster import Cluster
from tests.support.nginx_check import NginxCheck, nginx_check_in_tmp
from tests.support.nginx_conf_tree import parse, walk

GOOD_HOST, TENANT_HOST, TENANT = "good.example.com", "corpus.tenant.example", "tenant"


@pytest.fixture(scope="module")
def nginx_check() -> Iterator[NginxCheck]:
    yield from nginx_check_in_tmp()


def tenant_cluster(payload: Payload) -> Cluster:
    cluster = Cluster()
    cluster.ingress_class()
    cluster.app("good", host=GOOD_HOST, created=cluster.timestamp(0))
    if payload.configmap:
        cluster.configmap(payload.configmap)
    for obj in payload.supporting_objects(TENANT):
        cluster.add(obj)
    cluster.service("corpus", ns=TENANT)
    cluster.endpoint_slice("corpus", ns=TENANT)
    cluster.ingress("corpus", ns=TENANT, host=TENANT_HOST, paths=((payload.path or "/", "Prefix", "corpus", 80),),
                    annotations=payload.annotations, tls=payload.tls)
    return cluster


@pytest.mark.parametrize("payload", PAYLOADS, ids=[p.id for p in PAYLOADS])
def test_payload_is_refused_or_inert(payload: Payload, nginx_check: NginxCheck) -> None:
    model = tenant_cluster(payload).build(state_dir=str(nginx_check.paths.state_dir),
                                          run_dir=str(nginx_check.paths.run_dir))
    good = model.routes.get(GOOD_HOST)
    assert good is not None and good.prefix["/"].ingress == "default/good", model.problem_lines()
    text = render(model.config)
    assert_values_stay_arguments(model.config, text)
    # No directive that serves or loads files beside the template's own reads the payload's directory.
    for _, directive in walk(parse(text)):
        if directive.name in FILE_DIRECTIVES:
            assert not any(LEAK_DIR in arg for arg in directive.args), directive
        assert directive.lua is None or LEAK_DIR not in directive.lua, directive.name
    error = nginx_check.error(text)
    assert error is None, f"nginx -t refused the configuration: {error}\nproblems: {model.problem_lines()}"
