"""The request collector accepts only bounded label values from nginx's batches."""
from __future__ import annotations

import json
import random
from itertools import accumulate

from services.nginxconf.request_metrics import PREFIX, RequestMetricsLayout
from services.syncer.observability import exposition, request_collector
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
    lines = b"".join(totals.chunks({})).decode().splitlines()
    assert 'nginx_ingress_controller_requests{host="a.test",namespace="ns",ingress="web",service="web",path="/",' \
           'canary="",status="200",method="GET"} 3' in lines
    assert any(line.endswith('le="+Inf"} 36') for line in lines)  # each of the 12 buckets counted 1, three times
    assert any(line.startswith("nginx_ingress_controller_request_duration_seconds_sum{") and line.endswith(" 3.0")
               for line in lines)


def reference_exposition(totals: RequestTotals, const: dict[str, str]) -> list[str]:
    """The request metrics written line by line, each number by exposition.count or exposition.number: what the
    collector wrote before its lines were filled in whole series at a time."""
    names = totals.label_names
    series = [(exposition.labels_text({**const, **dict(zip(names, values))})[1:-1], values, numbers)
              for values, numbers in totals.totals.items()]
    requests = PREFIX + "requests"
    lines = exposition.family(requests, "The total number of client requests", "counter", ())
    lines += [f"{requests}{{{labels}}} {exposition.count(numbers[0])}" for labels, _, numbers in series]
    offset = 1
    for spec, bounds in totals.layout.histograms:
        name, end = PREFIX + spec.name, offset + len(bounds) + 1
        lines += exposition.family(name, spec.help, "histogram", ())
        for labels, _, numbers in series:
            if any(numbers[offset:end]):
                cumulative = list(accumulate(numbers[offset:end]))
                lines += [f'{name}_bucket{{{labels},le="{exposition.number(le)}"}} {exposition.count(count)}'
                          for le, count in zip((*bounds, float("inf")), cumulative)]
                lines += [f"{name}_sum{{{labels}}} {exposition.number(numbers[end])}",
                          f"{name}_count{{{labels}}} {exposition.count(cumulative[-1])}"]
        if spec.name == "connect_duration_seconds":
            lines += reference_summary(series, names, const, bounds, offset)
        offset = end + 1
    return lines


def reference_summary(series, names, const, bounds, offset) -> list[str]:
    per_ingress: dict[tuple[str, ...], tuple[list[float], float]] = {}
    for _, values, numbers in series:
        key = tuple(values[names.index(name)] for name in ("ingress", "namespace", "service", "canary"))
        counts, total = per_ingress.get(key, ([0.0] * (len(bounds) + 1), 0.0))
        per_ingress[key] = ([a + b for a, b in zip(counts, numbers[offset:])], total + numbers[offset + len(bounds) + 1])
    name = PREFIX + request_collector.UPSTREAM_LATENCY
    lines = exposition.family(name, "DEPRECATED Upstream service latency per Ingress (quantiles estimated from the "
                                    "connect_duration_seconds buckets)", "summary", ())
    for key, (counts, total) in per_ingress.items():
        if sum(counts):
            labels = exposition.labels_text({**const, **dict(zip(("ingress", "namespace", "service", "canary"), key))})
            lines += [f'{name}{labels[:-1]},quantile="{quantile}"}} '
                      f'{exposition.number(request_collector.estimate_quantile(quantile, bounds, counts))}'
                      for quantile in (0.5, 0.9, 0.99)]
            lines += [f"{name}_sum{labels} {exposition.number(total)}", f"{name}_count{labels} {exposition.count(sum(counts))}"]
    return lines


def test_the_exposition_is_line_for_line_what_the_line_by_line_writer_wrote():
    width, rng = LAYOUT.width, random.Random(7)
    totals = RequestTotals(LAYOUT)
    # Whole counts (as nginx's JSON gives them) with float sums, and integral sums (sizes).
    usual = {f"h{i}.test\tns{i % 3}\tweb{i}\tweb{i}\t/\t{'c' if i % 4 == 0 else ''}\t{200 + i % 3}\tGET":
             [rng.randint(0, 5) if rng.random() < 0.8 else rng.random() * 9 for _ in range(width)] for i in range(40)}
    for numbers in usual.values():
        numbers[1 + 11 + 1] = float(numbers[1 + 11 + 1])  # request_duration's sum: a float, as Lua sends it
    unusual = {
        'odd.test\tns\todd\todd\t/a%d%%s"q\\\x00\n\t\t200\tGET': [3] + [1] * (width - 1),  # labels to escape
        "fraction.test\tns\tf\tf\t/\t\t200\tGET": [2.5] + [0.5] * (width - 1),
        "integral-float.test\tns\tif\tif\t/\t\t200\tGET": [2.0] + [1.0] * (width - 1),
        "million.test\tns\tm\tm\t/\t\t200\tGET": [999_999] + [400_000] * (width - 1),  # cumulative past 1e6
        "negative.test\tns\tn\tn\t/\t\t500\tPUT": [-3] + [-1] * (width - 1),
        "nan.test\tns\tnan\tnan\t/\t\t500\tPUT": [1] + [float("nan")] * (width - 1),
        "big-sum.test\tns\tb\tb\t/\t\t200\tGET": [1] + [n for _, bounds in LAYOUT.histograms  # whole counts
                                                       for n in [1] * (len(bounds) + 1) + [1e7]],
        "idle.test\tns\ti\ti\t/\t\t200\tGET": [0] * width,
    }
    totals.add_batches([usual, unusual])
    totals.add_batches([{key: numbers for key, numbers in unusual.items() if "million" in key}])
    const = {"controller_class": "k8s.io/ingress-nginx", "controller_namespace": "in%gress", "controller_pod": "p"}

    def written() -> list[str]:
        return b"".join(totals.chunks(const)).decode().splitlines()

    assert written() == reference_exposition(totals, const)
    assert written() == reference_exposition(totals, const)  # again, from the labels texts kept
    assert 'path="/a%d%%s\\"q\\\\\x00\\n"' in "\n".join(written())
    totals.drop_ingresses({"ns/odd", "ns1/web1"})
    assert written() == reference_exposition(totals, const)


def test_numbers_that_are_not_numbers_are_dropped():
    totals = RequestTotals(LAYOUT)
    totals.add_batches([{"a.test\tns\tweb\tweb\t/\t\t200\tGET": ["1"] * LAYOUT.width,
                         "b.test\tns\tweb\tweb\t/\t\t200\tGET": [None] * LAYOUT.width}])
    assert not totals.totals and totals.dropped == 2
