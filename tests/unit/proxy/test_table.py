"""The passthrough routing table: snapshot/update application, validation, round robin."""
import pytest

from services.common.clone import Snapshot, Update
from services.proxy.table import EndpointError, RoutingTable, parse_endpoint


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
