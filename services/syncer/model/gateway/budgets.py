"""A rule's `retry` and `timeouts` (HTTPRouteRule) read and validated, as the Lua balancer spends them per request.

nginx decides which answers of a backend are retried before an answer comes (proxy_next_upstream, a location
directive): a rule with `retry` uses a location profile per set of retried codes, and per request timeout when it
has one too (proxy_next_upstream_timeout), so the first rule with a new combination reloads nginx once. The rest is
table data that the balancer (gateway_budget.lua) reads per request, and a changed number or duration applies
without a reload: how many retries (set_more_tries), and each attempt's connect, send and read timeouts
(set_timeouts), the smaller of timeouts.backendRequest and what is left of timeouts.request, counted from the
moment the request was routed. A request whose deadline passes answers 504, as one whose attempt times out.

What nginx cannot do, said in the warnings: retry on a code it has no condition for, and wait between retries
(`backoff`: balancer_by_lua may not sleep). The timeouts bound each phase of an attempt (connecting, each write, each
read), not the sum: a backend that sends its headers in time and then trickles its body is not cut at the deadline.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from services.nginxconf.config import BackendScheme

from . import fields
from .fields import RouteRejected

# The codes nginx can retry (proxy_next_upstream's conditions); the spec asks for 500, 502, 503 and 504.
RETRIABLE_CODES = (403, 404, 429, 500, 502, 503, 504)
DEFAULT_ATTEMPTS = 2  # `retry` without `attempts`: implementation-specific; ingress-nginx's 3 tries
MAX_ATTEMPTS = 20  # each retry holds a connection to a backend while the client waits
_UNITS_MS = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}
_DURATION_PART = re.compile(r"([0-9]+)(h|ms|m|s)")


@dataclass(frozen=True)
class RequestBudget:
    """What one request of a rule may spend: `attempts` retries after the first try (after a connection error, a
    timeout or one of `codes`), `request_ms` in all and `backend_ms` per attempt (0: no limit of pyngress's)."""
    attempts: int = 0
    codes: tuple[int, ...] = ()
    request_ms: int = 0
    backend_ms: int = 0
    retry: bool = False  # the rule has a `retry` stanza (its profile retries)


def milliseconds(value: str) -> int:
    """A Gateway API duration ("1h30m", "500ms") in milliseconds."""
    return sum(int(number) * _UNITS_MS[unit] for number, unit in _DURATION_PART.findall(value))


def plan_budget(raw_rule: dict[str, Any], *, where: str, warnings: list[str]) -> RequestBudget | None:
    """The rule's retry and timeouts, None when it has neither (nginx's defaults apply); raise RouteRejected saying
    what to change."""
    timeouts = fields.mapping(raw_rule.get("timeouts"), where=f"{where}.timeouts")
    request_ms, backend_ms = (_timeout(timeouts.get(key), where=f"{where}.timeouts.{key}")
                              for key in ("request", "backendRequest"))
    if request_ms and backend_ms > request_ms:
        raise RouteRejected(f"{where}.timeouts: backendRequest must be no longer than request, which covers it")
    retry = raw_rule.get("retry")
    if retry is None:
        return RequestBudget(request_ms=request_ms, backend_ms=backend_ms) if request_ms or backend_ms else None
    retry = fields.mapping(retry, where=f"{where}.retry")
    attempts = retry.get("attempts", DEFAULT_ATTEMPTS)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= MAX_ATTEMPTS:
        raise RouteRejected(f"{where}.retry: attempts {attempts!r} must be 1-{MAX_ATTEMPTS}")
    codes = []
    for code in fields.listing(retry.get("codes"), where=f"{where}.retry.codes", most=64):
        if isinstance(code, bool) or not isinstance(code, int) or not 400 <= code <= 599:
            raise RouteRejected(f"{where}.retry.codes: {code!r} must be a status code 400-599")
        if code not in RETRIABLE_CODES:
            warnings.append(f"{where}.retry.codes: nginx cannot retry an answer {code}; it is passed to the client "
                            f"(retried: {', '.join(map(str, RETRIABLE_CODES))})")
        elif code not in codes:
            codes.append(code)
    backoff = retry.get("backoff")
    if backoff is not None and milliseconds(fields.duration(backoff, where=f"{where}.retry.backoff")):
        warnings.append(f"{where}.retry.backoff: not honoured, nginx retries at once (its balancer cannot wait)")
    return RequestBudget(attempts=attempts, codes=tuple(sorted(codes)), request_ms=request_ms,
                         backend_ms=backend_ms, retry=True)


def _timeout(value: Any, *, where: str) -> int:
    """A timeout in milliseconds; 0 when absent or zero ("0s" disables it, as the spec says)."""
    return 0 if value is None else milliseconds(fields.duration(value, where=where))


def profile_directives(budget: RequestBudget, scheme: BackendScheme) -> tuple[tuple[str, str], ...]:
    """The location directives a rule with this budget needs: none without `retry`. With it, which failures are
    retried, no cap of nginx's on the tries (the balancer counts them), and with a request timeout no retry after
    it (so that an attempt cut at the deadline answers 504 rather than starting another)."""
    if not budget.retry:
        return ()
    module = "grpc" if scheme in ("grpc", "grpcs") else "proxy"
    conditions = " ".join(["error", "timeout", *(f"http_{code}" for code in budget.codes)])
    found = [(f"{module}_next_upstream", conditions), (f"{module}_next_upstream_tries", "0")]
    if budget.request_ms:
        found.append((f"{module}_next_upstream_timeout", f"{budget.request_ms}ms"))
    return tuple(found)
