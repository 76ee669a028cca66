"""Structured logging: one line per event, `key=value` pairs after the message, to stderr."""
from __future__ import annotations

import logging
import sys
import time
from typing import Any


class _KeyValueFormatter(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self.component = component

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [ts, record.levelname.lower(), self.component, record.getMessage()]
        fields: dict[str, Any] = getattr(record, "fields", {})
        parts.extend(f"{k}={_quote(v)}" for k, v in fields.items())
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def _quote(value: Any) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "=\n'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return text


def setup(component: str, level: str = "info") -> logging.Logger:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_KeyValueFormatter(component))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    return logging.getLogger(component)


def kv(**fields: Any) -> dict[str, Any]:
    """`log.info("reloaded", extra=kv(generation=3))` attaches key=value pairs to a line."""
    return {"fields": fields}
