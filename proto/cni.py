"""CNI error codes (CNI specification 1.1, "Error") and the error type every CNI component raises."""
from __future__ import annotations

from dataclasses import dataclass, field

SUPPORTED_VERSIONS = ("0.4.0", "1.0.0", "1.1.0")

# Well-known error codes of the CNI specification.
INCOMPATIBLE_VERSION = 1
UNSUPPORTED_FIELD = 2
CONTAINER_UNKNOWN = 3
INVALID_ENV = 4
IO_FAILURE = 5
DECODE_FAILURE = 6
INVALID_NETWORK_CONFIG = 7
TRY_AGAIN_LATER = 11
# STATUS: the plugin cannot serve ADD; or it can, with limited connectivity.
PLUGIN_NOT_AVAILABLE = 50
PLUGIN_NOT_AVAILABLE_LIMITED_CONNECTIVITY = 51
# 100 and up are plugin-specific.
INTERNAL = 100
IPAM_EXHAUSTED = 101
CHECK_FAILED = 102  # CHECK found the pod's network different from its prevResult


@dataclass
class CniError(Exception):
    code: int
    msg: str
    details: str = field(default="", kw_only=True)  # what to change, when the message does not say it

    def to_json(self, cni_version: str = "1.1.0") -> dict:
        return {"cniVersion": cni_version, "code": self.code, "msg": self.msg, "details": self.details}

    def __str__(self) -> str:
        return f"CNI error {self.code}: {self.msg}" + (f" ({self.details})" if self.details else "")

