"""Small helpers the integration and e2e tests share: free ports and waiting for a condition."""
from __future__ import annotations

import os
import random
import socket
import time
from typing import Callable, TypeVar

T = TypeVar("T")


# Below Linux's ephemeral range (32768-60999): a port the kernel hands out for port 0 is also one it may give
# any outgoing connection (nginx's upstream keepalive, a Prometheus scrape) before the test binds it.
_ALL_PORTS = (10000, 32767)


def _worker_ports() -> tuple[int, int]:
    """This process's share of the range: under pytest-xdist each worker draws from its own slice, since a
    port drawn is not bound until the test's server starts and another worker could draw it meanwhile."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1" ... or unset without xdist
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if not worker.startswith("gw") or workers < 2:
        return _ALL_PORTS
    index = int(worker[2:])
    low, high = _ALL_PORTS
    share = (high - low + 1) // workers
    return low + index * share, low + (index + 1) * share - 1


_PORTS = _worker_ports()
_random = random.Random()
# Ports handed out already: two drawn in a row (a controller's HTTP and HTTPS ports) are not bound yet, so the
# bind test alone could give the same one twice.
_handed_out: set[int] = set()


def free_port() -> int:
    """A TCP port nothing listens on or is connected from now, on every address (servers bind 0.0.0.0), and
    not handed out before by this process."""
    while True:
        port = _random.randint(*_PORTS)
        if port in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind(("0.0.0.0", port))
            except OSError:
                continue
            _handed_out.add(port)
            return port


def wait_for(check: Callable[[], T], timeout: float = 10.0, interval: float = 0.05, what: str = "condition") -> T:
    """Call `check` until it returns something truthy; fail with the last value or error after `timeout`."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
            last = result
        except Exception as err:  # the thing waited for may fail in any way until it is ready
            last = err
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def wait_until_steady(check: Callable[[], T], timeout: float = 10.0, times: int = 5, what: str = "condition") -> T:
    """`wait_for(check)` until it holds `times` calls in a row: after an nginx reload, the old workers may accept a
    few more connections before they close their listening sockets, so one answer from a new worker does not mean
    every next one comes from them."""
    streak: list[T] = []

    def held() -> bool:
        try:
            result = check()
        except Exception:
            result = None  # type: ignore[assignment]
        if not result:
            streak.clear()
            return False
        streak.append(result)
        return len(streak) >= times
    wait_for(held, timeout, interval=0.02, what=f"{what} ({times} times in a row)")
    return streak[-1]
