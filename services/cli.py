"""`pyngress <command>`: one entry point for every component, so `ps` shows which piece is which."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Callable, Sequence

from services.common import settings as settings_mod
from services.common.files import NotPrivateError

# command → (module, help). Each module has `run(settings) -> int | None`.
COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("services.supervisor.up", "run supervisord with the whole tree in the foreground"),
    "watcher": ("services.watcher.main", "list and watch objects, publish the store"),
    "syncer": ("services.syncer.main", "turn the store into nginx configuration and keep nginx in sync"),
    "nginx": ("services.nginx.launcher", "bootstrap, get the listening sockets, exec the nginx master"),
    "nginx-listeners": ("services.nginx.holder", "hold nginx's listening sockets for every nginx master"),
    "proxy": ("services.proxy.main", "TLS passthrough on the HTTPS port"),
    "webhook": ("services.syncer.admission.main", "the validating admission webhook (--validating-webhook)"),
    "cniserver": ("services.cniserver.main", "the CNI server on its root-only Unix socket"),
    "cniworker": ("services.cniworker.main", "a CNI worker: pod network setup and teardown"),
    "crashmon": ("services.crashmon.main", "supervisord event listener recording process exits"),
    "tracer": ("services.tracer.main", "export the spans nginx records over OTLP (OpenTelemetry tracing)"),
    "render": ("services.tools.print_config", "print the nginx.conf that would be applied"),
    "status": ("services.tools.status", "show each running component's state"),
}


# Commands with flags of their own instead of the shared settings: each module has
# `add_arguments(parser)` and `run(namespace) -> int | None`. They are imported to build the parser, so
# they must stay light to import.
OWN_FLAGS_COMMANDS: dict[str, tuple[str, str]] = {
    "manifests": ("services.tools.install_manifests", "print the install manifests (YAML) for kubectl apply"),
    "docs": ("services.tools.docs", "print docs/annotations.md or (--configmap) docs/configmap.md, generated"),
    "nginx-ingress-controller": ("services.tools.ingress_nginx_args", "ingress-nginx's entrypoint, taking its flags"),
    "webhook-certificate": ("services.tools.webhook_certificate",
                            "make the admission webhook's certificate Secret and patch the webhook's caBundle"),
    "lint": ("services.tools.lint", "judge manifests' Ingresses as the admission webhook would (exit 1 on an error)"),
    "convert": ("services.tools.convert", "print Gateway API resources for ingress-nginx Ingresses, and what does not convert"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="pyngress", description="pyngress: ingress controller and CNI server")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    try:
        for name, (_, help_text) in COMMANDS.items():
            settings_mod.add_arguments(sub.add_parser(name, help=help_text))
    except settings_mod.EnvironmentSettingError as err:
        print(f"pyngress: {err}", file=sys.stderr)
        return 2
    for name, (module_name, help_text) in OWN_FLAGS_COMMANDS.items():
        importlib.import_module(module_name).add_arguments(sub.add_parser(name, help=help_text))
    ns = parser.parse_args(argv)
    if not ns.command:
        parser.print_help()
        return 2
    try:
        if ns.command in OWN_FLAGS_COMMANDS:
            return importlib.import_module(OWN_FLAGS_COMMANDS[ns.command][0]).run(ns) or 0
        run: Callable[[settings_mod.Settings], int | None] = importlib.import_module(COMMANDS[ns.command][0]).run
        return run(settings_mod.from_namespace(ns)) or 0
    except NotPrivateError as err:
        # A directory or socket that is not private is the user's to fix: the message says how, and a
        # traceback would bury it.
        print(f"pyngress {ns.command}: refusing to start: {err}", file=sys.stderr)
        return 2  # as run_process does for a StartupError


if __name__ == "__main__":
    sys.exit(main())
