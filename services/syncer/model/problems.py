"""What building the model found wrong with an object, and how bad it is.

`ERROR`: something was refused (an Ingress dropped, a ConfigMap key's default applied instead of its
value). `WARNING`: the object is served, but part of it was ignored (a path another Ingress already
serves, an unsupported annotation). Shown as text, a warning starts with "warning: ", as ingress-nginx
users read it in logs.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass


class Severity(enum.Enum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, kw_only=True)
class Problem:
    severity: Severity
    object: str  # what the problem is about: "Ingress ns/name", "ConfigMap ns/name", "--configmap"
    message: str  # what is wrong and what to change

    @classmethod
    def error(cls, obj: str, message: str) -> Problem:
        return cls(severity=Severity.ERROR, object=obj, message=message)

    @classmethod
    def warning(cls, obj: str, message: str) -> Problem:
        return cls(severity=Severity.WARNING, object=obj, message=message)

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def __str__(self) -> str:
        prefix = "warning: " if self.severity is Severity.WARNING else ""
        return f"{prefix}{self.object}: {self.message}"
