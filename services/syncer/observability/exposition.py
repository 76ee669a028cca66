"""Prometheus text exposition (format 0.0.4) written by hand, for the metrics whose names ingress-nginx's Go
client gives: prometheus_client would rename a counter `nginx_ingress_controller_requests` to `..._total`,
and ingress-nginx's users' dashboards and alerts name them as they are."""
from __future__ import annotations

from typing import Iterable, Mapping

from prometheus_client.utils import floatToGoString


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def labels_text(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{name}="{escape(str(value))}"' for name, value in labels.items()) + "}"


def number(value: float) -> str:
    value = float(value)
    # What floatToGoString answers for any finite value under a million (Go writes exponents from there), in a
    # third of its time: a large /metrics writes millions of numbers.
    return repr(value) if -1e6 < value < 1e6 else floatToGoString(value)


# The texts of the counts written so far (bucket counts repeat: most are small numbers), at most this many kept.
_COUNT_TEXTS: dict[float, str] = {}
COUNT_TEXTS_KEPT = 1 << 16


def count(value: float) -> str:
    """A count (a counter's, a histogram bucket's) as ingress-nginx's Go client writes a whole number under a
    million: `10`, not `10.0`; others as `number` writes them. Made once per value."""
    text = _COUNT_TEXTS.get(value)
    if text is None:
        text = str(int(value)) if -1e6 < value < 1e6 and float(value).is_integer() else number(value)
        if len(_COUNT_TEXTS) < COUNT_TEXTS_KEPT:
            _COUNT_TEXTS[value] = text
    return text


def family(name: str, help_text: str, kind: str,
           samples: Iterable[tuple[Mapping[str, str], float]], *, suffix: str = "") -> list[str]:
    """The HELP and TYPE lines of one metric and its samples (`suffix` is appended to each sample's name)."""
    lines = [f"# HELP {name} {escape(help_text)}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{suffix}{labels_text(labels)} {number(value)}" for labels, value in samples]
    return lines
