"""RequestMirror (HTTPRouteRequestMirror, HTTPRouteRequestPercentageMirror, HTTPRouteRequestMultipleMirrors): a copy
of a rule's requests goes to another Service, whose answer is ignored; the client gets the main backend's.

A rule's mirrors are table data (the Service, the share of requests); only their number is in nginx.conf: a rule with
N mirrors uses a location profile with N `mirror` directives (MIRROR_LOCATION/1..N), so the first rule with N mirrors
reloads nginx once, and every later change (another Service, another percentage, a new route) does not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backends import ServiceRef
from .fields import RouteRejected

# The internal location prefix of the mirrored copies (nginx.conf.j2); the copy i of a request goes to <prefix>i.
MIRROR_LOCATION = "/_pyngress_gateway_mirror/"


@dataclass(frozen=True)
class MirrorChoice:
    """One RequestMirror: its Service (None when the reference cannot be served; `problem` says why) and the share
    of requests copied, numerator/denominator."""
    service: ServiceRef | None
    numerator: int = 100
    denominator: int = 100
    problem: str | None = None


def share(raw: dict[str, Any], *, where: str) -> tuple[int, int]:
    """The filter's `percent` or `fraction` as (numerator, denominator); every request when neither is given."""
    percent, fraction = raw.get("percent"), raw.get("fraction")
    if percent is not None and fraction is not None:
        raise RouteRejected(f"{where}: give percent or fraction, not both")
    if percent is not None:
        if isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100:
            raise RouteRejected(f"{where}: percent {percent!r} must be an integer 0-100")
        return percent, 100
    if fraction is None:
        return 100, 100
    if not isinstance(fraction, dict):
        raise RouteRejected(f"{where}.fraction: must be an object with numerator and denominator")
    numerator = _count(fraction.get("numerator"), name="numerator", where=where)
    denominator = _count(fraction.get("denominator", 100), name="denominator", where=where)
    if denominator < 1 or numerator > denominator:
        raise RouteRejected(f"{where}.fraction: the numerator ({numerator}) must not exceed the denominator "
                            f"({denominator}), which must be at least 1")
    return numerator, denominator


def _count(value: Any, *, name: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 1_000_000:
        raise RouteRejected(f"{where}.fraction: {name} {value!r} must be an integer 0-1000000")
    return value


def mirror_locations(count: int) -> tuple[tuple[str, str], ...]:
    """The `mirror` directives of a profile whose rules have `count` mirrors."""
    return tuple(("mirror", f"{MIRROR_LOCATION}{i}") for i in range(1, count + 1))
