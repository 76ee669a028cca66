"""`pyngress render --manifests DIR`: print the nginx.conf that would be applied, and the routes.

Routing lives in Lua tables pushed without a reload, so nginx.conf alone does not show where a host goes:
the routes follow the configuration as comments, one line per host and path.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from services.common.settings import Settings
from services.nginxconf.render import render, template_from
from services.nginxconf.template import TemplateError
from services.syncer.model.build import build_model
from services.syncer.model.types import Model
from services.syncer.nginx_apply.geoip2_databases import GeoIP2Databases, with_geoip2_databases
from services.watcher.manifests import ManifestsSource


def routes_summary(model: Model) -> list[str]:
    lines = ["# Routes (served by Lua from pushed tables; changing them does not reload nginx):"]
    for host, host_routes in model.routes_json().items():
        for kind in ("exact", "prefix"):
            entries = host_routes[kind].items() if kind == "exact" else host_routes[kind]
            for path, route in entries:
                target = route["backend"] or "503 (no such Service or port)"
                endpoints = model.backends.get(route["backend"] or "", [])
                lines.append(f"#   {host}{path} ({kind}) -> {target} [{', '.join(endpoints) or 'no endpoints'}]"
                             f" profile={route['profile']} from {route['ingress']}")
    for host, endpoints in model.passthrough.items():
        lines.append(f"#   {host} (ssl-passthrough) -> {', '.join(endpoints) or 'no endpoints'}")
    lines += [f"# Rejected: {p}" for p in model.problems if p.is_error]
    lines += [f"# {p}" for p in model.problems if not p.is_error]
    return lines


def run(settings: Settings) -> int:
    if not settings.source.manifests:
        print("pyngress render: give the manifests directory with --manifests DIR", file=sys.stderr)
        return 2
    if not Path(settings.source.manifests).is_dir():
        print(f"pyngress render: {settings.source.manifests} is not a directory; give the directory that holds the "
              "manifests with --manifests DIR", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as scratch:
        # Metadata the files lack is filled in a scratch state dir: rendering must not touch a live one.
        source = ManifestsSource(settings.source.manifests, settings=settings, state_dir=scratch)
        changes = source.scan()  # a new source's first scan: every object is a change
        store = changes.changed if changes is not None else {}
        for error in source.errors:
            print(f"pyngress render: {error}", file=sys.stderr)
    model = with_geoip2_databases(build_model(store, settings=settings), GeoIP2Databases(settings.geoip2),
                                  settings.ingress.configmap)
    try:
        template = template_from(Path(settings.paths.template)) if settings.paths.template else None
        conf = render(model.config, template)
    except TemplateError as err:
        print(f"pyngress render: --template: {err}", file=sys.stderr)
        return 2
    sys.stdout.write(conf)
    print("\n".join(routes_summary(model)))
    return 0
