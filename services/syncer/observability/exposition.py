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


def family(name: str, help_text: str, kind: str,
           samples: Iterable[tuple[Mapping[str, str], float]], *, suffix: str = "") -> list[str]:
    """The HELP and TYPE lines of one metric and its samples (`suffix` is appended to each sample's name)."""
    lines = [f"# HELP {name} {escape(help_text)}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{suffix}{labels_text(labels)} {number(value)}" for labels, value in samples]
    return lines
