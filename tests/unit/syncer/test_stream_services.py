"""--tcp/udp-services-configmap entries: what each becomes, and the refusals with what to change."""
import pytest

from services.nginxconf.config import StreamServer
from services.nginxconf.render import render
from tests.support import k8s


def services(cluster, tcp=None, udp=None):
    flags = {}
    for protocol, data in (("tcp", tcp), ("udp", udp)):
        if data is not None:
            cluster.add({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": protocol, "namespace": "ingress"},
                         "data": data})
            flags[f"{protocol}_services_configmap"] = f"ingress/{protocol}"
    return cluster.build(**flags)


@pytest.fixture
def db(cluster):
    cluster.add(k8s.service("db", port=5432, port_name="pg"))
    cluster.add(k8s.endpoint_slice("db", ["10.0.0.7", "10.0.0.8"], 5432, port_name="pg"))
    return cluster


@pytest.mark.parametrize("value, proxy_in, proxy_out", [
    ("default/db:5432", False, False), ("default/db:pg", False, False), ("default/db:5432:PROXY", True, False),
    ("default/db:5432::PROXY", False, True), ("default/db:5432:PROXY:PROXY", True, True),
])
def test_entries_become_stream_servers_with_their_endpoints(db, value, proxy_in, proxy_out):
    model = services(db, tcp={"9000": value})
    port = value.split(":")[1]
    backend = f"tcp-default-db-{port}"
    assert model.config.stream_servers == (StreamServer(port=9000, protocol="tcp", backend=backend,
                                                        proxy_protocol_in=proxy_in, proxy_protocol_out=proxy_out),)
    assert model.stream_endpoints == {backend: ["10.0.0.7:5432", "10.0.0.8:5432"]}
    assert db.rejections(model) == []
    conf = render(model.config)
    assert ("listen 9000 proxy_protocol;" if proxy_in else "listen 9000;") in conf
    assert ("proxy_protocol on;" in conf) is proxy_out
    assert "load_module /usr/lib/nginx/modules/ngx_stream_js_module.so;" in conf


def test_udp_waits_for_one_answer_by_default(db):
    model = services(db, udp={"5353": "default/db:5432"})
    conf = render(model.config)
    assert "listen 5353 udp;" in conf and 'proxy_responses 1;' in conf and 'proxy_timeout "600s";' in conf


@pytest.mark.parametrize("key, value, problem", [
    ("80", "default/db:5432", "port 80 is the HTTP port; choose another port"),
    ("10254", "default/db:5432", "port 10254 is the healthz port"),
    ("0", "default/db:5432", "the key must be the port to listen on, 1-65535"),
    ("65536", "default/db:5432", "the key must be the port to listen on"),
    ("db", "default/db:5432", "the key must be the port to listen on"),
    ("9000", "default/db", "the value must be NAMESPACE/SERVICE:PORT"),
    ("9000", "default/db:5432;", "the value must be NAMESPACE/SERVICE:PORT"),
    ("9000", "default/db:5432:proxy", "the value must be NAMESPACE/SERVICE:PORT"),
    ("9000", 'default/db:5432"\n}', "the value must be NAMESPACE/SERVICE:PORT"),
])
def test_bad_entries_are_refused_and_the_others_kept(db, key, value, problem):
    model = services(db, tcp={key: value, "9001": "default/db:5432"})
    assert [s.port for s in model.config.stream_servers] == [9001]
    [rejection] = db.rejections(model)
    assert problem in rejection and "--tcp-services-configmap ingress/tcp" in rejection


def test_proxy_protocol_is_refused_for_udp(db):
    model = services(db, udp={"5353": "default/db:5432::PROXY"})
    assert model.config.stream_servers == ()
    assert "the PROXY protocol is for TCP services only" in db.rejections(model)[0]


def test_a_missing_service_closes_connections_and_says_so(db):
    model = services(db, tcp={"9000": "default/missing:5432"})
    assert model.stream_endpoints == {"tcp-default-missing-5432": []}
    assert any("connections to port 9000 are closed until it is fixed" in w for w in db.warnings(model))
