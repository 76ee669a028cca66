"""Flags shared by every component: the same names on every command line and in the environment.

Every flag `--some-flag` can also be given as the environment variable `PYNGRESS_SOME_FLAG`; a flag on
the command line wins. Names follow ingress-nginx's where one exists.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, fields
from typing import Any, Sequence

DEFAULT_RUN_DIR = "/var/run/pyngress"
DEFAULT_STATE_DIR = "/var/lib/pyngress"


def parse_bool(text: str | bool) -> bool:
    if isinstance(text, bool):
        return text
    value = text.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, got {port}")
    return port


@dataclass
class Settings:
    manifests: str | None = None
    kubeconfig: str | None = None
    http_port: int = 80
    https_port: int = 443
    # ingress-nginx's ports and meanings: /healthz, /metrics and the dashboard on the healthz port (on
    # --healthz-host, every address when empty); nginx's internal status and configuration API on the
    # status port; nginx's TLS port behind the passthrough proxy.
    healthz_port: int = 10254
    healthz_host: str = ""
    status_port: int = 10246
    ssl_passthrough_proxy_port: int = 442
    state_dir: str = DEFAULT_STATE_DIR
    run_dir: str = DEFAULT_RUN_DIR
    enable_ssl_passthrough: bool = False
    enable_cni: bool = False
    ingress_class: str = "nginx"
    controller_class: str = "k8s.io/ingress-nginx"
    watch_ingress_without_class: bool = False
    configmap: str | None = None
    tcp_services_configmap: str | None = None
    udp_services_configmap: str | None = None
    default_ssl_certificate: str | None = None
    publish_status_address: str | None = None
    publish_service: str | None = None
    update_status: bool = True
    election_id: str = "ingress-controller-leader"
    watch_namespace: str | None = None
    annotations_prefix: str = "nginx.ingress.kubernetes.io"
    # As ingress-nginx: refuse every ExternalName Service as an Ingress backend.
    disable_svc_external_name: bool = False
    node_name: str | None = None
    pod_cidr: str | None = None
    proxy_processes: int = 2
    cni_workers: int = 2
    log_level: str = "info"

    def as_args(self) -> list[str]:
        """The command-line form of these settings, for handing them on to child processes."""
        args: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            args.append(f"--{f.name.replace('_', '-')}={str(value).lower() if isinstance(value, bool) else value}")
        return args


_TYPES: dict[str, Any] = {
    "http_port": parse_port, "https_port": parse_port, "healthz_port": parse_port,
    "status_port": parse_port, "ssl_passthrough_proxy_port": parse_port,
    "proxy_processes": int, "cni_workers": int,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every shared flag to `parser`, defaulting from PYNGRESS_* environment variables."""
    for f in fields(Settings):
        flag = "--" + f.name.replace("_", "-")
        env = "PYNGRESS_" + f.name.upper()
        default = f.default
        if isinstance(default, bool):
            # `--flag`, `--flag=true` and `--flag=false` all work, as with Go's flag package.
            parser.add_argument(flag, dest=f.name, nargs="?", const=True, type=parse_bool,
                                default=parse_bool(os.environ[env]) if env in os.environ else default,
                                help=f"(env {env}, default {str(default).lower()})")
        else:
            convert = _TYPES.get(f.name, str)
            env_value = os.environ.get(env)
            parser.add_argument(flag, dest=f.name, type=convert,
                                default=convert(env_value) if env_value else default,
                                help=f"(env {env}, default {default})")


def from_namespace(ns: argparse.Namespace) -> Settings:
    return Settings(**{f.name: getattr(ns, f.name) for f in fields(Settings)})


def parse(argv: Sequence[str] | None = None, prog: str = "pyngress") -> Settings:
    parser = argparse.ArgumentParser(prog=prog)
    add_arguments(parser)
    return from_namespace(parser.parse_args(argv))
