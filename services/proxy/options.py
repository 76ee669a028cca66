"""The proxy's time and size limits, from `PYNGRESS_PROXY_*` environment variables.

They are not shared flags (no other component has them), so they are read from the environment:

- PYNGRESS_PROXY_HELLO_TIMEOUT (default 5): seconds from accept until the ClientHello, and any inbound
  PROXY header, must be complete;
- PYNGRESS_PROXY_MAX_PENDING_HELLOS (default 1024): connections per process still waiting for their
  ClientHello; past it the oldest is closed;
- PYNGRESS_PROXY_CONNECT_TIMEOUT (default 5): seconds to connect to one upstream before the next;
- PYNGRESS_PROXY_IDLE_TIMEOUT (default 600): seconds without data in either direction before an
  established connection is closed;
- PYNGRESS_PROXY_DRAIN_TIMEOUT (default 5): seconds open connections may finish after SIGTERM (keep it
  below supervisord's stopwaitsecs).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields
from typing import Mapping


class OptionError(ValueError):
    """An environment variable with a value the proxy cannot use."""


@dataclass(frozen=True)
class ProxyOptions:
    hello_timeout: float = 5.0
    max_pending_hellos: int = 1024
    connect_timeout: float = 5.0
    idle_timeout: float = 600.0
    drain_timeout: float = 5.0

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] = os.environ) -> ProxyOptions:
        values: dict[str, float | int] = {}
        for f in fields(cls):
            name = "PYNGRESS_PROXY_" + f.name.upper()
            text = environ.get(name)
            if not text:
                continue
            convert = int if f.type == "int" else float
            try:
                value = convert(text)
            except ValueError:
                raise OptionError(f"{name}={text!r}: expected a {'whole ' if convert is int else ''}number") from None
            if not (math.isfinite(value) and value > 0):
                raise OptionError(f"{name}={text!r}: must be a finite number greater than 0")
            values[f.name] = value
        return cls(**values)  # type: ignore[arg-type]
