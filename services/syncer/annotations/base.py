"""What every annotation group is made of: a validated value, a risk level, and what the values mean."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, NamedTuple


class Risk(enum.IntEnum):
    """How much harm a hostile value could do; the ConfigMap's `annotations-risk-level` caps what is accepted."""
    LOW = 1
    MEDIUM = 2
    HIGH = 3
    CRITICAL = 4


class InvalidValue(ValueError):
    """A value outside its allow-list; the message says what to write instead."""


class InvalidAnnotation(ValueError):
    """An annotation that rejects its Ingress. `name` is the full annotation name."""

    def __init__(self, name: str, value: object, reason: str) -> None:
        super().__init__(f"annotation {name} value {value!r}: {reason}")
        self.name, self.value, self.reason = name, value, reason


@dataclass(frozen=True)
class Annotation:
    """One annotation, named without the prefix.

    `validate` returns the canonical value or raises InvalidValue. When `setting` is set, the canonical value
    goes straight into the location profile under that key; otherwise its group's `apply` interprets it.
    """
    name: str
    validate: Callable[[str], str]
    risk: Risk
    doc: str
    setting: str | None = None


class LocationSetting(NamedTuple):
    """One location profile setting and the annotation (without prefix) whose value it carries."""
    name: str
    value: str
    source: str


@dataclass
class IngressAnnotations:
    """What one Ingress's annotations mean once every value has passed its validator."""
    prefix: str
    # Location profile settings; a directive such as `allow` may repeat.
    location: list[LocationSetting] = field(default_factory=list)
    ssl_redirect: bool | None = None  # None: the ConfigMap's ssl-redirect applies
    force_ssl_redirect: bool | None = None  # None: the ConfigMap's force-ssl-redirect applies
    ssl_passthrough: bool = False
    warnings: list[str] = field(default_factory=list)

    def add(self, setting: str, value: str, source: str) -> None:
        """Add a profile setting; `source` names the annotation to blame if its value cannot be rendered."""
        self.location.append(LocationSetting(setting, value, source))

    def warn(self, name: str, message: str) -> None:
        self.warnings.append(f"annotation {self.prefix}/{name} {message}")

    def profile_settings(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted({(s.name, s.value) for s in self.location}))
