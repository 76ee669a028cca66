"""Bringing nginx to a model: reload only for nginx.conf changes, push everything else to Lua."""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import replace
from typing import Any

from services.common import changed_keys, logs
from services.common.canonical import canonical_json_kept, json_fragment
from services.common.changed_keys import ChangedKeys
from services.common.settings import Settings
from services.nginxconf.config import DEFAULT_PROFILE, LocationProfile, NginxConfig, ServerSettings
from services.nginxconf.config_check import NginxConfigError
from services.nginxconf.listen_addresses import gateway_ports
from services.nginxconf.modsecurity import log_files
from services.nginxconf.paths import STREAM_ENDPOINTS_FILE, NginxPaths
from services.nginxconf.reload import NginxReloader, NginxReloadError
from services.nginxconf.render import render
from services.nginxconf.tables import NginxPushError, NginxUnavailableError, TablePusher, certificates_delta
from services.nginxconf.template import Template
from services.syncer.model.configmap_snippets import snippets_of, with_snippets
from services.syncer.model.incremental import ANY_SIDE_CHANGES, SideChanges
from services.syncer.model.problems import Problem
from services.syncer.model.types import NOTHING_CHANGED, Model, TableChanges
from services.syncer.observability.metrics import SyncerMetrics

from .external_names import NameIndex, resolve_backends
from .modsecurity_logs import create_missing_logs
from .refused_entries import RefusedBackendUsers, refused_problems
from .reload_rate import ReloadRateLimiter
from .taken_ports import taken_ports
from .template_watch import TemplateTracker
from .worker_files import RootOnlyFiles, WorkerFiles

log = logging.getLogger("syncer")

# A push of the same tables: nothing in them changed since the last (nginx lost them, and gets them whole).
NOTHING_CHANGED_KEYS: dict[str, ChangedKeys] = {"routes": frozenset(), "backends": frozenset(),
                                                "certificates": frozenset()}

# Each location profile is a named location in nginx.conf (templates/nginx.conf.j2).
PROFILE_LOCATION = re.compile(r"^\s*location @profile_(\S+) \{", re.MULTILINE)


class NginxApplier:
    def __init__(self, settings: Settings, metrics: SyncerMetrics) -> None:
        self.settings = settings
        self.metrics = metrics
        paths = NginxPaths.of(settings.paths.state_dir, settings.paths.run_dir)
        self.reloader = NginxReloader(paths, max_draining_generations=settings.reload.max_draining_worker_generations)
        self.reload_rate = ReloadRateLimiter(settings.reload.sync_rate_limit)
        # While a reload waits for the rate limiter: when (time.monotonic()) the sync loop may apply the model again.
        self.reload_due: float | None = None
        self.pusher = TablePusher(paths)
        self.conf_path = paths.conf
        self.templates = TemplateTracker(settings.paths.template, paths.template_snapshots)
        self.applied_conf: str | None = None
        self.applied_profiles: set[str] = set()  # the named locations of applied_conf
        # The ConfigMap snippets of applied_conf (by key; none after a restart), and the last ones nginx -t refused
        # with its message: while the ConfigMap holds those, the applied ones keep applying.
        self.applied_snippets: dict[str, str] = snippets_of(ServerSettings())
        self.refused_snippets: tuple[dict[str, str], str] | None = None
        self.auth_files = WorkerFiles(paths.auth_dir)
        self.stream_files = WorkerFiles(paths.stream_dir)
        self.ssl_files = RootOnlyFiles(paths.ssl_dir)
        self._dh_file: str | None = None  # the DH parameters' file written last
        self.tables: dict[str, Any] | None = None  # what nginx should hold: routes, backends, certificates
        # Each host's routes as pushed, for the profiles loaded then: the model's HostRoutes, their canonical JSON,
        # and that JSON as a fragment of the routes table. Equal JSON keeps its fragment, so that the pusher,
        # which compares entries by identity, sends only hosts whose routes changed.
        self._route_objects: dict[str, Any] = {}
        self._route_bytes: dict[str, bytes] = {}
        self._route_json: dict[str, Any] = {}
        self._json_profiles: set[str] = set()
        self._json_deferred = False  # whether a reload was waiting when the kept JSON was made (see _servable)
        self._route_profiles: dict[str, frozenset[str]] = {}  # the profiles each host's routes name
        self._backend_names = NameIndex()
        self._refused_backend_users = RefusedBackendUsers()  # the Ingresses of the backends nginx refuses
        # The changes of the models applied since _tables last looked (TableChanges): it looks at those keys only.
        self._unseen = TableChanges()
        self.nginx_serving = False
        # The Gateway listeners' ports another program held at the last apply (taken_ports.py), with why: left out of
        # nginx.conf, and their listeners' status says so (the Gateway status writer reads this).
        self.taken_ports: dict[int, str] = {}

    async def start(self) -> None:
        # After a syncer restart, the file on disk is what nginx runs: an identical render needs no reload.
        try:
            self._set_applied(self.conf_path.read_text())
        except FileNotFoundError:
            self._set_applied(None)

    def _set_applied(self, conf: str | None) -> None:
        # Read from the text itself: after a restart whose first render fails `nginx -t`, the routes that
        # the running configuration can serve are still known and still pushed.
        self.applied_conf = conf
        self.applied_profiles = set(PROFILE_LOCATION.findall(conf or ""))

    async def apply(self, model: Model, side: SideChanges = ANY_SIDE_CHANGES) -> dict[str, str]:
        """Bring nginx to `model`. Returns the new location profiles that `nginx -t` refused (name → nginx's
        message), having applied nothing: the caller rejects their Ingresses and applies the rest. `side`: the files
        that may differ from the model applied before (SideChanges; by default any)."""
        self._unseen = self._unseen.then(model.changed)
        self.metrics.note_routes(model)  # before the push: the first requests of a new Ingress are counted
        model = self._without_refused_snippets(model)
        model = self._without_taken_ports(model)
        create_missing_logs(log_files(model.config))  # before nginx -t opens them
        conf, template = self.templates.render(model.config)
        deferred = self._reload_waits(conf)
        if not deferred and self.templates.on_trial(template) and conf != self.applied_conf:
            failure = await self._template_failure(conf, model.config, template)
            if failure:
                self.templates.refuse(failure)
                conf, template = self.templates.render(model.config)
        # Before the reload: a new profile's htpasswd file (a new stream server's endpoints) must be there when
        # its first request (connection) comes.
        self.auth_files.write(model.auth_files, side.auth_files)
        dh_file = model.dh_param.file_name if model.dh_param else None
        if dh_file != self._dh_file:
            self.ssl_files.note_unused([self._dh_file] if self._dh_file else [])
            if model.dh_param:
                dh = model.dh_param
                self.ssl_files.write({dh.file_name: dh.content}, frozenset({dh.file_name}))
            self._dh_file = dh_file
        self.ssl_files.write(model.ssl_files, side.ssl_files)
        if model.config.stream_servers:
            # The balancer takes addresses: ExternalName Services are resolved at each apply, as for Ingresses.
            endpoints, _ = await resolve_backends(model.stream_endpoints)
            self.stream_files.write({STREAM_ENDPOINTS_FILE: json.dumps(endpoints, sort_keys=True).encode()})
        if deferred:
            pass  # the tables below are pushed now; routes of profiles nginx has not loaded keep their old entry
        elif conf != self.applied_conf:
            errors_before = self.metrics.stats.reload_errors
            refused = await self._reload(conf, model, template)
            if refused:
                return refused
            if self.templates.on_trial(template) and self.metrics.stats.reload_errors > errors_before:
                # It passed `nginx -t` but nginx could not load it (its Lua failed in the master): back to
                # the template in use.
                self.templates.refuse(f"nginx could not load it: {self.metrics.stats.last_error}")
                return await self.apply(model, side)
        elif not self.metrics.stats.config_hash:
            self.metrics.stats.config_hash = model.config.digest()
        if not deferred:
            self.templates.accept(template)
        tables, changed, routes_moved = self._tables(model)
        if routes_moved or self._differs(tables, changed):
            await self._push(tables, changed)
        model.problems.extend(refused_problems(self.pusher.refused, model.routes, self._refused_backend_users,
                                               changed["routes"]))
        if deferred:
            return {}  # the files of the configuration nginx still runs stay until it runs another
        self.auth_files.remove_others(model.auth_files)
        # Old client keys go once nginx no longer loads them.
        self.ssl_files.remove_unused(model.ssl_files, [self._dh_file] if self._dh_file else [])
        return {}

    def _reload_waits(self, conf: str) -> bool:
        """Whether the reload `conf` needs must wait for --sync-rate-limit; if so, reload_due says until when."""
        if conf == self.applied_conf or self.reload_rate.ready():
            self.reload_due = None
            return False
        due = self.reload_rate.ready_at()
        if self.reload_due is None:
            log.info("reload deferred by --sync-rate-limit; changes that need none apply meanwhile",
                     extra=logs.kv(in_seconds=round(due - time.monotonic(), 2)))
        self.reload_due = due
        return True

    async def _template_failure(self, conf: str, config: NginxConfig, candidate: Template) -> str | None:
        """nginx -t's message when the candidate template is what makes `conf` fail: it fails even without
        the location profiles, and the template in use passes there (a tenant's profile is not its fault)."""
        try:
            await self.reloader.test(conf)
            return None
        except NginxConfigError:
            pass
        bare = config.without_profiles()
        try:
            await self.reloader.test(render(bare, candidate))
            return None
        except NginxConfigError as err:
            message = f"nginx -t: {err}"
        if self.templates.in_use is not None:
            try:
                await self.reloader.test(render(bare, self.templates.in_use))
            except NginxConfigError:
                return None
        return message

    async def _refused_profiles(self, config: NginxConfig, template: Template) -> dict[str, str]:
        """The new profiles of `config` that fail `nginx -t` on their own, found by halving the new ones.

        Empty when the configuration fails without any of them (a global setting): that is no tenant's doing.
        """
        async def failure(profiles: list[LocationProfile]) -> str | None:
            try:
                await self.reloader.test(render(replace(config, profiles=profiles), template))
                return None
            except NginxConfigError as err:
                return str(err)

        async def refused_among(profiles: list[LocationProfile]) -> dict[str, str]:
            message = await failure(profiles)
            if message is None:
                return {}
            if len(profiles) == 1:
                return {profiles[0].name: message}
            half = len(profiles) // 2
            return {**await refused_among(profiles[:half]), **await refused_among(profiles[half:])}

        new = [p for p in config.profiles if p.name not in self.applied_profiles and p.name != DEFAULT_PROFILE]
        if not new or await failure([]) is not None:
            return {}
        return await refused_among(new)

    async def _snippets_refused(self, config: NginxConfig, template: Template, error: str) -> bool:
        """Whether the ConfigMap's new snippets are what `nginx -t` refuses in `config`: it passes with the applied
        ones. If so they are remembered as refused (with `error`), and the applied ones keep applying."""
        snippets = snippets_of(config.server)
        if snippets == self.applied_snippets:
            return False
        try:
            await self.reloader.test(render(with_snippets(config, self.applied_snippets), template))
        except NginxConfigError:
            return False
        self.refused_snippets = (snippets, error)
        log.error("nginx -t refused the ConfigMap's snippets; their previous values keep applying",
                  extra=logs.kv(error=error))
        return True

    def _without_refused_snippets(self, model: Model) -> Model:
        """`model` with the applied ConfigMap snippets in place of those `nginx -t` refused (reported as a problem
        of the ConfigMap); `model` itself when it holds none of them."""
        if self.refused_snippets is None or snippets_of(model.config.server) != self.refused_snippets[0]:
            return model
        snippets, error = self.refused_snippets
        keys = [key for key, value in snippets.items() if value != self.applied_snippets.get(key, "")]
        message = f"key {', '.join(keys)}: nginx -t refused it ({error}); the previous value keeps applying"
        model.problems.append(Problem.error(f"ConfigMap {self.settings.ingress.configmap}", message))
        return replace(model, config=with_snippets(model.config, self.applied_snippets))

    def _without_taken_ports(self, model: Model) -> Model:
        """`model` without the ports of Gateway listeners that another program listens on (taken_ports.py), each
        reported; `model` itself when every new port is free."""
        try:
            held = gateway_ports(self.conf_path.read_text())
        except FileNotFoundError:
            held = ()
        taken = self.taken_ports = taken_ports((port for port, _ in model.config.gateway_ports), held=held,
                                               ipv6=model.config.listen_ipv6)
        if not taken:
            return model
        for port, why in taken.items():
            model.problems.append(Problem.error(f"Gateway listener port {port}", (
                f"{why}: nginx does not listen on it, and the Gateway listeners on that port serve nothing; stop that "
                "program or move the listeners to another port")))
        return replace(model, config=replace(model.config, gateway_ports=tuple(
            (port, scheme) for port, scheme in model.config.gateway_ports if port not in taken)))

    async def _reload(self, conf: str, model: Model, template: Template) -> dict[str, str]:
        started = time.monotonic()
        try:
            running = await self.reloader.apply(conf)
        except NginxReloadError as err:
            # The file passed `nginx -t` and is in place: not a rejected configuration, a reload nginx has
            # not finished (its log says why). Counted as a failed reload, as ingress-nginx counts it.
            self.reload_rate.take()
            self._set_applied(conf)
            self.applied_snippets = snippets_of(model.config.server)
            self._reload_failed(str(err), "nginx has not finished loading the new configuration")
            return {}
        except NginxConfigError as err:
            refused = await self._refused_profiles(model.config, template)
            if refused:
                log.warning("nginx -t refused the location settings of some Ingresses; applying the others",
                            extra=logs.kv(profiles=",".join(sorted(refused))))
            elif await self._snippets_refused(model.config, template, str(err)):
                model = self._without_refused_snippets(model)
                conf = render(model.config, template)
                return {} if conf == self.applied_conf else await self._reload(conf, model, template)
            else:
                self._reload_failed(str(err), "nginx rejected the new configuration; the last good one keeps serving")
            return refused
        self._set_applied(conf)
        self.applied_snippets = snippets_of(model.config.server)
        stats = self.metrics.stats
        stats.config_hash = model.config.digest()
        if not running:
            return {}  # no master yet: the file is in place and the next nginx start reads it; not a reload
        self.reload_rate.take()
        stats.reloads += 1
        stats.generation += 1
        stats.last_reload_ok = True
        stats.last_reload_time = time.time()
        stats.last_error = ""
        self.metrics.generation.set(stats.generation)
        self.metrics.sync_seconds.labels("reload").observe(time.monotonic() - started)
        log.info("nginx reloaded", extra=logs.kv(generation=stats.generation, hash=stats.config_hash[:12]))
        return {}

    def _reload_failed(self, error: str, what: str) -> None:
        stats = self.metrics.stats
        stats.reload_errors += 1
        stats.last_reload_ok = False
        stats.last_error = error
        log.error(what, extra=logs.kv(error=error))

    def _tables(self, model: Model) -> tuple[dict[str, Any], dict[str, ChangedKeys], bool]:
        """The tables to push, the keys of each keyed table that may differ from the last ones (None: any), and
        whether any host's routes changed. A host's routes are turned into JSON again only when the model has new
        ones for it (the incremental model keeps a host's HostRoutes while nothing it depends on changes). The routes
        table is the one kept here, changed in place: the pusher keeps its own copy of what it sent."""
        changed, self._unseen = self._unseen, NOTHING_CHANGED
        hosts = changed.routes
        deferred = self.reload_due is not None
        # Once no reload waits, no kept entry may stand in for a route any longer (see _servable).
        if deferred or self._json_deferred:
            if self.applied_profiles != self._json_profiles or (self._json_deferred and not deferred):
                self._route_objects, self._route_bytes, self._route_json = {}, {}, {}
                self._route_profiles = {}
                self._json_profiles = set(self.applied_profiles)
                hosts = None
        elif self.applied_profiles != self._json_profiles:
            # A reload loaded or dropped profiles: only a host with a route on one of those is served otherwise
            # (_servable). Made again for every host, a new profile cost 7 s of JSON at 30,000 Ingresses.
            moved = self.applied_profiles ^ self._json_profiles
            affected = [host for host, names in self._route_profiles.items() if not names.isdisjoint(moved)]
            for host in affected:
                self._route_objects.pop(host, None)
            self._json_profiles = set(self.applied_profiles)
            if hosts is not None:
                hosts = hosts | frozenset(affected)
        self._json_deferred = deferred
        objects, raw, json, profiles = self._route_objects, self._route_bytes, self._route_json, self._route_profiles
        # Not `hosts - model.routes.keys()` and the like: those go through every key of the view.
        looked_at = list(objects if hosts is None else hosts)
        routes_moved = False
        for host in looked_at:
            if host not in model.routes:
                routes_moved |= json.pop(host, None) is not None
                for kept in (objects, raw, profiles):
                    kept.pop(host, None)
        for host in model.routes if hosts is None else (host for host in looked_at if host in model.routes):
            host_routes = model.routes[host]
            if objects.get(host) is not host_routes:
                objects[host] = host_routes
                routes_json = host_routes.to_json()
                profiles[host] = _profiles_named(routes_json)
                data = canonical_json_kept(self._servable(host, routes_json))
                if raw.get(host) != data:
                    raw[host], json[host] = data, json_fragment(data)
                    routes_moved = True
        return ({"routes": json, "backends": model.backends, "certificates": model.certificates},
                {"routes": hosts, "backends": changed.backends, "certificates": changed.certificates}, routes_moved)

    def _differs(self, tables: dict[str, Any], changed: dict[str, ChangedKeys]) -> bool:
        """Whether the backends or certificates of `tables` differ from those last pushed: at the keys `changed`
        names only (any: compared whole, their entries kept from one model to the next by identity)."""
        last = self.tables
        if last is None:
            return True
        backends, before, keys = tables["backends"], last["backends"], changed["backends"]
        if backends is not before and (backends != before if keys is None
                                       else any(backends.get(key) != before.get(key) for key in keys)):
            return True
        certificates, before = tables["certificates"], last["certificates"]
        return certificates is not before and certificates_delta(before, certificates, changed["certificates"]) is not None

    def _servable(self, host: str, host_routes: dict[str, Any]) -> dict[str, Any]:
        """A route whose profile nginx has not loaded cannot be served with the settings its Ingress asked for.
        While its reload waits for --sync-rate-limit, its path keeps the entry pushed before, with the settings
        nginx runs (as ingress-nginx serves its last sync until the next); a path new to the host waits for the
        reload. Otherwise (the reload failed) the route is left out rather than served with other settings."""
        loaded = self.applied_profiles
        pushed: dict[tuple[str, str], Any] | None = None

        def servable(kind: str, path: str, route: dict[str, Any]) -> dict[str, Any] | None:
            nonlocal pushed
            if route["profile"] in loaded:
                return route
            if self.reload_due is None:
                return None
            if pushed is None:
                pushed = self._pushed_routes(host)
            before = pushed.get((kind, path))
            return before if before is not None and before["profile"] in loaded else None

        exact = ((p, servable("exact", p, r)) for p, r in host_routes["exact"].items())
        host_routes["exact"] = {p: r for p, r in exact if r is not None}
        prefix = ((p, servable("prefix", p, r)) for p, r in host_routes["prefix"])
        host_routes["prefix"] = [[p, r] for p, r in prefix if r is not None]
        if host_routes["default"]:
            host_routes["default"] = servable("default", "", host_routes["default"])
        return host_routes

    def _pushed_routes(self, host: str) -> dict[tuple[str, str], Any]:
        """The entries last pushed for `host`, by kind ("exact", "prefix", "default") and path."""
        data = self._route_bytes.get(host)
        if data is None:
            return {}
        pushed = json.loads(data)
        entries = {("exact", path): route for path, route in pushed["exact"].items()}
        entries.update({("prefix", path): route for path, route in pushed["prefix"]})
        if pushed["default"]:
            entries[("default", "")] = pushed["default"]
        return entries

    async def _push(self, tables: dict[str, Any], changed: dict[str, ChangedKeys]) -> None:
        started = time.monotonic()
        self.tables = tables
        refused_before = {table: dict(entries) for table, entries in self.pusher.refused.items()}
        try:
            # The Lua balancer takes addresses: ExternalName backends are resolved at each push (and may resolve
            # to other addresses without any change to the model).
            backends, named = await resolve_backends(tables["backends"], self._backend_names, changed["backends"])
            await self.pusher.push(routes=tables["routes"], backends=backends, certificates=tables["certificates"],
                                   changed={**changed, "backends": changed_keys.union(changed["backends"], named)})
        except (NginxUnavailableError, OSError) as err:
            # nginx is (re)starting: the state files hold the tables for its next start, and
            # repush_if_needed() pushes them once it answers.
            self.nginx_serving = False
            log.warning("could not push to nginx yet", extra=logs.kv(error=str(err)))
            return
        except NginxPushError as err:
            self.metrics.stats.last_error = str(err)
            log.error("nginx refused a table; it keeps the last good one", extra=logs.kv(error=str(err)))
            return
        for table, entries in self.pusher.refused.items():
            for key, why in entries.items():
                if refused_before.get(table, {}).get(key) != why:
                    # The other entries are served; this key keeps its last good value in nginx, if any.
                    log.error("nginx refused a table entry; the others are applied",
                              extra=logs.kv(table=table, key=key, error=why))
        self.nginx_serving = True
        self.metrics.endpoint_pushes.inc()
        self.metrics.sync_seconds.labels("push").observe(time.monotonic() - started)

    async def repush_if_needed(self) -> None:
        if self.tables is None:
            return
        try:
            needed = await self.pusher.needs_push()
        except (NginxUnavailableError, OSError):
            self.nginx_serving = False
            return
        if needed:
            if self.pusher.unanswered:
                log.info("pushing the tables again: nginx did not answer the last push in time")
            else:
                log.info("nginx lost its dynamic tables (restarted); pushing them again")
            await self._push(self.tables, NOTHING_CHANGED_KEYS)
        else:
            self.nginx_serving = True

    def health(self) -> dict[str, Any]:
        stats = self.metrics.stats
        return {"nginx_serving": self.nginx_serving and self.applied_conf is not None,
                "last_reload_successful": stats.last_reload_ok, "last_error": stats.last_error,
                "generation": stats.generation, **self.templates.status(),
                # Seconds until a reload that waits for --sync-rate-limit may happen; None when none waits.
                "reload_waits_seconds": (None if self.reload_due is None
                                         else round(max(0.0, self.reload_due - time.monotonic()), 2)),
                "refused_entries": {table: sorted(entries)[:50] for table, entries in self.pusher.refused.items()
                                    if entries}}


def _profiles_named(host_routes: dict[str, Any]) -> frozenset[str]:
    """The location profiles the routes of one host (HostRoutes.to_json()) are served with."""
    routes = [*host_routes["exact"].values(), *(route for _, route in host_routes["prefix"])]
    if host_routes["default"]:
        routes.append(host_routes["default"])
    return frozenset(route["profile"] for route in routes)
