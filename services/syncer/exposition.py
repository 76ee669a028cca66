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
    return floatToGoString(value)


def family(name: str, help_text: str, kind: str,
           samples: Iterable[tuple[Mapping[str, str], float]], *, suffix: str = "") -> list[str]:
    """The HELP and TYPE lines of one metric and its samples (`suffix` is appended to each sample's name)."""
    lines = [f"# HELP {name} {escape(help_text)}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{suffix}{labels_text(labels)} {number(value)}" for labels, value in samples]
    return lines


def histogram_samples(name: str, labels: Mapping[str, str], bounds: Iterable[float], counts: Iterable[float],
                      total: float) -> list[str]:
    """One histogram's _bucket (cumulative, ending with +Inf), _sum and _count lines; `counts` has one count per
    bound plus one for values above the last."""
    lines, cumulative = [], 0.0
    bounds = list(bounds)
    for bound, count in zip(bounds + [float("inf")], counts):
        cumulative += count
        lines.append(f"{name}_bucket{labels_text({**labels, 'le': number(bound)})} {number(cumulative)}")
    lines.append(f"{name}_sum{labels_text(labels)} {number(total)}")
    lines.append(f"{name}_count{labels_text(labels)} {number(cumulative)}")
    return lines
