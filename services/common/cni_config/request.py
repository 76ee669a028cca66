"""One CNI call as the plugin forwards it: `{"env": {...CNI_* variables...}, "config": "<base64 of its stdin>"}`.

`decode_body` splits the HTTP body into the environment and the raw network configuration (code 6 when
it does not decode); `parse_request` turns those two into a `CniRequest`. The cniserver answers VERSION
itself (`version_result`); every other command goes to a cniworker, which parses the same two parts
with the same rules.
"""
from __future__ import annotations

import binascii
import json
from dataclasses import dataclass
from typing import Any, Mapping

from proto.cni import DECODE_FAILURE, SUPPORTED_VERSIONS, CniError

from .network import NetworkConfig, decode_json, decode_network_config, parse_network_config
from .runtime_env import RuntimeEnv, parse_runtime_env

NEWEST_VERSION = SUPPORTED_VERSIONS[-1]


@dataclass(frozen=True)
class CniRequest:
    """One validated CNI call (any command but VERSION)."""
    env: RuntimeEnv
    network: NetworkConfig


def parse_request(env: Mapping[str, str], config: bytes) -> CniRequest:
    """Validate the CNI environment, then the network configuration, of one call."""
    runtime_env = parse_runtime_env(env)
    return CniRequest(runtime_env, parse_network_config(config, command=runtime_env.command))


def decode_body(body: bytes) -> tuple[dict[str, str], bytes]:
    """The body's environment and the raw network configuration (the plugin's stdin)."""
    data = decode_json(body, what="request body",
                       details='send {"env": {"CNI_COMMAND": ...}, "config": "<base64 of the network configuration>"}')
    if not isinstance(data, dict):
        raise CniError(DECODE_FAILURE, f"request body must be a JSON object, got {type(data).__name__}",
                       details='send {"env": {...}, "config": "<base64 of the network configuration>"}')
    env = data.get("env")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise CniError(DECODE_FAILURE, 'request field "env" must be an object of string values',
                       details="pass the plugin's CNI_* environment variables as strings")
    encoded = data.get("config")
    if not isinstance(encoded, str):
        raise CniError(DECODE_FAILURE, 'request field "config" must be a base64 string',
                       details="pass the plugin's stdin (the network configuration) base64-encoded")
    try:
        config = binascii.a2b_base64(encoded.encode("ascii"), strict_mode=True)
    except (UnicodeEncodeError, binascii.Error) as err:
        raise CniError(DECODE_FAILURE, f'request field "config" is not valid base64 ({err})',
                       details="encode the network configuration with standard base64 (RFC 4648, with padding)") from err
    return env, config


def version_result(config: bytes) -> dict[str, Any]:
    """The VERSION output: the caller's cniVersion echoed and every version this plugin speaks.
    Runtimes may probe VERSION without a configuration; one that is given must be a JSON object."""
    version = decode_network_config(config).get("cniVersion") if config.strip() else None
    return {"cniVersion": version if isinstance(version, str) and version else NEWEST_VERSION,
            "supportedVersions": list(SUPPORTED_VERSIONS)}


def cni_version_for_reply(body: bytes) -> str:
    """The cniVersion to answer a failed request with: the caller's, when it is one we speak."""
    try:
        version = json.loads(binascii.a2b_base64(json.loads(body)["config"])).get("cniVersion")
    except Exception:  # whatever made the request fail may make this fail too; the default is then right
        return NEWEST_VERSION
    return version if version in SUPPORTED_VERSIONS else NEWEST_VERSION
