"""The passthrough routing table: snapshot/update application, validation, round robin, wildcards, weights and the
TLS contexts of Terminate hosts."""
import ssl
import subprocess

import pytest

from services.common.clone import Snapshot, Update
from services.proxy.table import MAX_SCHEDULE, EndpointError, RoutingTable, parse_endpoint, weighted_schedule


def test_snapshot_then_updates():
    table = RoutingTable()
    table.apply(Snapshot({"host/a.example": ["10.0.0.1:443"], "config": {"use_proxy_protocol": True}}))
    assert table.endpoints_for("a.example") == (("10.0.0.1", 443),)
    assert table.use_proxy_protocol is True
    table.apply(Update("host/b.example", ["[fd00::2]:8443"]))
    table.apply(Update("host/a.example", None))
    table.apply(Update("config", None))
    assert table.endpoints_for("a.example") is None
    assert table.endpoints_for("b.example") == (("fd00::2", 8443),)
    assert table.use_proxy_protocol is False
    table.apply(Snapshot({}))
    assert len(table) == 0 and table.changes == 5


def test_round_robin_starts_one_further_each_time():
    table = RoutingTable()
    table.apply(Snapshot({"host/rr.example": ["10.0.0.1:1", "10.0.0.2:2", "10.0.0.3:3"]}))
    firsts = [table.endpoints_for("rr.example")[0][0] for _ in range(4)]
    assert firsts == ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1"]
    assert sorted(table.endpoints_for("rr.example")) == [("10.0.0.1", 1), ("10.0.0.2", 2), ("10.0.0.3", 3)]


def test_bad_entries_are_left_out_and_the_rest_applies():
    table = RoutingTable()
    table.apply(Snapshot({"host/Mixed.Example": ["10.0.0.1:443", "nonsense", 7], "host/bad.example": "10.0.0.1:1",
                          "config": {"use_proxy_protocol": "yes"}, "surprise": 1}))
    assert table.endpoints_for("mixed.example") == (("10.0.0.1", 443),)
    assert table.endpoints_for("bad.example") == ()
    assert table.use_proxy_protocol is False


@pytest.mark.parametrize("text, reason", [
    ("10.0.0.1", "has no port"), ("fd00::1:443", "must be written"), ("example.com:443", "IP address"),
    ("10.0.0.1:0", "valid port"), ("10.0.0.1:99999", "valid port"), ("10.0.0.1:x", "valid port"), (443, "string"),
])
def test_endpoint_errors(text, reason):
    with pytest.raises(EndpointError, match=reason):
        parse_endpoint(text)


def test_the_proxy_listens_on_ipv6_unless_the_table_says_not():
    table = RoutingTable()
    assert table.listen_ipv6 is True  # before any table: ingress-nginx's default
    table.apply(Snapshot({"config": {"use_proxy_protocol": False, "listen_ipv6": False}}))
    assert table.listen_ipv6 is False
    table.apply(Update("config", {"use_proxy_protocol": False, "listen_ipv6": True}))
    assert table.listen_ipv6 is True


def test_the_most_specific_name_wins_exact_then_the_longest_wildcard():
    table = RoutingTable()
    table.apply(Snapshot({"host/*.example.com": ["10.0.0.1:1"], "host/*.deep.example.com": ["10.0.0.2:2"],
                          "host/exact.deep.example.com": ["10.0.0.3:3"], "host/web.example.com": "nginx",
                          "host/*.app.example.com": "nginx"}))
    first = {name: (table.endpoints_for(name) or [("nginx", 0)])[0][0] for name in (
        "a.example.com", "a.b.example.com", "x.deep.example.com", "exact.deep.example.com", "web.example.com",
        "x.app.example.com", "example.com", "other.org")}
    assert first == {"a.example.com": "10.0.0.1", "a.b.example.com": "10.0.0.1", "x.deep.example.com": "10.0.0.2",
                     "exact.deep.example.com": "10.0.0.3", "web.example.com": "nginx", "x.app.example.com": "nginx",
                     "example.com": "nginx", "other.org": "nginx"}
    table.apply(Update("host/*.deep.example.com", None))
    assert table.endpoints_for("x.deep.example.com") == (("10.0.0.1", 1),)
    assert len(table) == 4


def test_weights_give_each_backend_its_exact_share_spread_out():
    table = RoutingTable()
    table.apply(Snapshot({"host/w.example": {"backends": [
        {"weight": 300, "endpoints": ["10.0.0.1:1"]}, {"weight": 100, "endpoints": ["10.0.0.2:2", "10.0.0.3:3"]},
        {"weight": 0, "endpoints": ["10.0.0.9:9"]}, {"endpoints": ["10.0.0.9:9"]}]}}))
    firsts = [table.endpoints_for("w.example")[0][0] for _ in range(8)]
    assert firsts.count("10.0.0.1") == 6 and "10.0.0.9" not in firsts
    assert firsts[:4].count("10.0.0.1") == 3  # spread, not 6 then 2
    assert {f for f in firsts if f != "10.0.0.1"} == {"10.0.0.2", "10.0.0.3"}  # round robin within a backend


def test_a_weighted_backend_without_endpoints_keeps_its_share_closed():
    table = RoutingTable()
    table.apply(Snapshot({"host/w.example": {"backends": [{"weight": 1, "endpoints": ["10.0.0.1:1"]},
                                                          {"weight": 1, "endpoints": []}]}}))
    assert sorted(len(table.endpoints_for("w.example")) for _ in range(4)) == [0, 0, 1, 1]


def test_weighted_schedule_is_exact_and_bounded():
    assert weighted_schedule((2, 1)) == (0, 1, 0)
    assert len(weighted_schedule((999_999, 1))) <= MAX_SCHEDULE + 1
    assert weighted_schedule((999_999, 1)).count(1) == 1  # a weight above 0 is never rounded to none


def test_terminate_hosts_get_a_tls_context_and_a_bad_certificate_closes_their_connections(tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", tmp_path / "k", "-out", tmp_path / "c", "-days", "1", "-subj", "/CN=t.example"],
                   check=True, capture_output=True)
    pems = {"cert": (tmp_path / "c").read_text(), "key": (tmp_path / "k").read_text()}
    backends = [{"weight": 1, "endpoints": ["10.0.0.1:1"]}]
    table = RoutingTable()
    table.apply(Snapshot({"host/t.example": {"backends": backends, "terminate": pems},
                          "host/u.example": {"backends": backends, "terminate": pems},
                          "host/bad.example": {"backends": backends, "terminate": {**pems, "key": "nonsense"}}}))
    terminated = table.lookup("t.example")
    assert isinstance(terminated.tls, ssl.SSLContext) and terminated.tls is table.lookup("u.example").tls
    assert table.lookup("bad.example").targets() == ()
    assert table.lookup("other.example") is None


def test_terminate_backends_with_tls_get_a_verifying_context_and_bad_cas_close_their_share(tmp_path):
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", tmp_path / "k", "-out", tmp_path / "c", "-days", "1", "-subj", "/CN=t.example"],
                   check=True, capture_output=True)
    ca = (tmp_path / "c").read_text()
    pems = {"cert": ca, "key": (tmp_path / "k").read_text()}
    verified = {"weight": 1, "endpoints": ["10.0.0.1:1"], "tls": {"ca": ca, "name": "backend.example"}}
    system = {"weight": 1, "endpoints": ["10.0.0.2:1"], "tls": {"ca": None, "name": "public.example"}}
    plain = {"weight": 1, "endpoints": ["10.0.0.3:1"]}
    table = RoutingTable()
    table.apply(Snapshot({
        "host/t.example": {"backends": [verified, system, plain], "terminate": pems},
        "host/bad.example": {"backends": [{**verified, "tls": {"ca": "not a PEM", "name": "b.example"}}, plain],
                             "terminate": pems},
        "host/nameless.example": {"backends": [{**verified, "tls": {"ca": ca}}], "terminate": pems},
        "host/passed.example": {"backends": [verified, plain]}}))  # passed through: the client's TLS, untouched
    destination = table.lookup("t.example")
    seen = {}
    for _ in range(3):
        [endpoint] = destination.targets()
        seen[endpoint[0]] = destination.backend_tls[destination.chosen]
    assert seen["10.0.0.3"] is None
    assert seen["10.0.0.1"].server_name == "backend.example" and seen["10.0.0.2"].server_name == "public.example"
    for backend in (seen["10.0.0.1"], seen["10.0.0.2"]):
        assert backend.context.verify_mode == ssl.CERT_REQUIRED and backend.context.check_hostname
    assert [cert["subject"] for cert in seen["10.0.0.1"].context.get_ca_certs()] == [((("commonName", "t.example"),),)]
    bad = table.lookup("bad.example")
    assert bad.backends == ((), (("10.0.0.3", 1),))  # the unverifiable backend's share is closed, never plain
    assert table.lookup("nameless.example").backends == ((),)
    assert table.lookup("passed.example").backend_tls == (None, None)
    table.apply(Snapshot({"host/t.example": {"backends": [verified], "terminate": pems}}))
    assert table.lookup("t.example").backend_tls[0].context is seen["10.0.0.1"].context  # kept: no reload of its CA
