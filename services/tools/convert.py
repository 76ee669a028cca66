"""`pyngress convert`: ingress-nginx Ingresses in, Gateway API resources out (YAML on stdout), with a report.

The input is read as `pyngress lint` reads it (services/tools/inputs.py: manifests, or a cluster's Ingresses,
Services and ConfigMaps with --kubeconfig); the conversion itself is
services/tools/gateway_convert/. The report (stderr, or --report FILE) has one line per annotation, path or
Ingress not converted, and why:

    FILE:LINE: Ingress NAMESPACE/NAME: annotation NAME: why

The exit code is 0 when everything converted, 1 when the report has lines, 2 when the input cannot be read.
Kept light to import: `pyngress` builds its parser from this module (services/cli.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from services.common.settings import IngressSettings
from services.tools.inputs import InputError, add_source_arguments, read_objects

_DEFAULT_CONTROLLER = IngressSettings().gateway_controller_name
# What the conversion reads from a cluster: the Ingresses, and the Services and ConfigMaps they name.
_CLUSTER_KINDS = ("Ingress", "Service", "ConfigMap")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Print the Gateway API resources (GatewayClass, Gateway, ReferenceGrants, HTTPRoutes) that "
                          "serve what the given ingress-nginx Ingresses serve, and report each annotation or path "
                          "that does not convert; exit code 1 when the report is not empty.")
    add_source_arguments(parser)
    parser.add_argument("--gateway-class", default="pyngress", metavar="NAME",
                        help="the GatewayClass to create and use (default pyngress)")
    parser.add_argument("--gateway-controller-name", default=_DEFAULT_CONTROLLER, metavar="NAME",
                        help=f"its controllerName (default {_DEFAULT_CONTROLLER}, pyngress's)")
    parser.add_argument("--gateway-name", default="pyngress", metavar="NAME", help="the Gateway (default pyngress)")
    parser.add_argument("--gateway-namespace", default="default", metavar="NS",
                        help="the Gateway's namespace (default default)")
    parser.add_argument("--http-port", type=int, default=80, help="the HTTP listener's port (default 80)")
    parser.add_argument("--https-port", type=int, default=443, help="the HTTPS listeners' port (default 443)")
    parser.add_argument("--ingress-class", metavar="NAME",
                        help="convert only the Ingresses of this class (spec.ingressClassName or the legacy "
                        "kubernetes.io/ingress.class annotation); default: every Ingress given")
    parser.add_argument("--annotations-prefix", default="nginx.ingress.kubernetes.io",
                        help="the annotations' prefix (default nginx.ingress.kubernetes.io)")
    parser.add_argument("--report", metavar="FILE", help="write the report to FILE instead of stderr")


def to_yaml(resources: list[dict[str, Any]]) -> str:
    """The resources as YAML documents, in the order given, without anchors (which kubectl takes, people do not
    read easily)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True
    return yaml.dump_all(resources, Dumper=Dumper, sort_keys=False)


def run(namespace: argparse.Namespace) -> int:
    from services.tools.gateway_convert import GatewayOptions, convert

    try:
        objects, unreadable = read_objects(namespace, cluster_kinds=_CLUSTER_KINDS)
    except InputError as err:
        print(f"pyngress convert: {err}", file=sys.stderr)
        return 2
    options = GatewayOptions(class_name=namespace.gateway_class, controller_name=namespace.gateway_controller_name,
                             name=namespace.gateway_name, namespace=namespace.gateway_namespace,
                             http_port=namespace.http_port, https_port=namespace.https_port)
    conversion = convert(objects, options, prefix=namespace.annotations_prefix, ingress_class=namespace.ingress_class)
    sys.stdout.write(to_yaml(conversion.resources))
    lines = [*unreadable, *conversion.report]
    text = "".join(f"{line}\n" for line in lines)
    if namespace.report:
        Path(namespace.report).write_text(text)
    else:
        sys.stderr.write(text)
    return 1 if lines else 0
