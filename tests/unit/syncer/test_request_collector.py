"""The request collector accepts only bounded label values from nginx's batches."""
from __future__ import annotations

import json

from services.nginxconf.request_metrics import RequestMetricsLayout
from services.syncer.observability import request_collector
from services.syncer.observability.request_collector import RequestTotals

LAYOUT = RequestMetricsLayout()


def batch(*keys: str) -> bytes:
    return json.dumps([{key: [1] * LAYOUT.width for key in keys}]).encode()


def test_keys_with_an_unbounded_method_or_status_are_dropped():
    totals = RequestTotals(LAYOUT)
    totals.add_batches(batch("a.test\tns\tweb\tweb\t/\t\t200\tGET", "a.test\tns\tweb\tweb\t/\t\t200\t_OTHER",
                             "a.test\tns\tweb\tweb\t/\t\t200\tMADEUP", "a.test\tns\tweb\tweb\t/\t\t2000\tGET",
                             "a.test\tns\tweb\tweb\t/\t\tabc\tGET"))
    assert {labels[-1] for labels in totals.totals} == {"GET", "_OTHER"}
    assert totals.dropped == 3


def test_undefined_hosts_beyond_the_bound_share_one_series(monkeypatch):
    monkeypatch.setattr(request_collector, "UNDEFINED_HOSTS_KEPT", 2)
    totals = RequestTotals(RequestMetricsLayout(per_undefined_host=True))
    totals.add_batches(batch(*(f"h{i}.test\t\t\t\t\t\t404\tGET" for i in range(5))))
    assert sorted(labels[0] for labels in totals.totals) == ["_other", "h0.test", "h1.test"]
    assert totals.totals[("_other", "", "", "", "", "", "404", "GET")][0] == 3


def test_counts_are_written_as_ingress_nginx_writes_whole_numbers():
    totals = RequestTotals(LAYOUT)
    for _ in range(3):
        totals.add_batches(batch("a.test\tns\tweb\tweb\t/\t\t200\tGET"))
    lines = "".join(totals.chunks({})).splitlines()
    assert 'nginx_ingress_controller_requests{host="a.test",namespace="ns",ingress="web",service="web",path="/",' \
           'canary="",status="200",method="GET"} 3' in lines
    assert any(line.endswith('le="+Inf"} 36') for line in lines)  # each of the 12 buckets counted 1, three times
    assert any(line.startswith("nginx_ingress_controller_request_duration_seconds_sum{") and line.endswith(" 3.0")
               for line in lines)
