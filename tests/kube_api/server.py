"""A Kubernetes API server for tests: the REST semantics clients rely on, served by aiohttp on 127.0.0.1
over plain HTTP, in a thread of the test process, with hooks to inject the faults a real cluster has.

The official `kubernetes` client works against it unchanged (configure it with `server.configuration()`
or `server.write_kubeconfig(path)`). What it implements is listed, one semantic per test, in
tests/kube_api/test_server.py, and its authentication and RBAC (auth.py, rbac.py) in test_rbac.py.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from aiohttp import web
from multidict import CIMultiDict

from . import errors, patches, rbac, selectors
from .admission import Admission
from .auth import ADMIN_TOKEN, Tokens
from .errors import ApiError
from .resources import ALL_VERBS, RESOURCE_TYPES, SUBRESOURCE_VERBS, ResourceType, by_kind, find, group_versions
from .storage import DROP, EXPIRE, Storage, Watcher

SERVER_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-pyngress-test", "platform": "linux/amd64"}
DEFAULT_WATCH_TIMEOUT_SECONDS = 1800.0  # the real server ends watches after 30-60 minutes
_USER = web.RequestKey("user", str)  # who made a request, for admission webhooks


def _json(body: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    """`warnings` (an admission webhook's) as the API server sends them: a `Warning: 299 - "text"` header each."""
    headers: CIMultiDict[str] = CIMultiDict()
    for warning in warnings or []:
        headers.add("Warning", '299 - "{}"'.format(warning.replace("\\", "\\\\").replace('"', '\\"')))
    return web.Response(body=json.dumps(body).encode(), status=status, content_type="application/json",
                        headers=headers)


def _error_response(err: ApiError) -> web.Response:
    return _json(err.status(), err.code)


def _dry_run(query: Any) -> bool:
    return query.get("dryRun") == "All"


def _is_true(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def _list_item(obj: dict[str, Any]) -> dict[str, Any]:
    """Items of a typed list carry no kind/apiVersion: the list says them once."""
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


class _Route:
    """What a resource path names: a collection or an object (maybe a subresource of it), in a namespace or not,
    at one of the versions its kind is served at."""

    def __init__(self, rtype: ResourceType, namespace: str | None, name: str | None, subresource: str | None,
                 version: str) -> None:
        self.rtype, self.namespace, self.name, self.subresource = rtype, namespace, name, subresource
        self.api_version = rtype.api_version_at(version)

    @property
    def status(self) -> bool:
        return self.subresource == "status"

    def shown(self, obj: dict[str, Any]) -> dict[str, Any]:
        """`obj` as this version shows it (the versions of one kind differ only in apiVersion here)."""
        return obj if obj.get("apiVersion") == self.api_version else {**obj, "apiVersion": self.api_version}

    def list_item(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Items of a typed list carry no kind/apiVersion (the list says them once); a custom resource's do."""
        return self.shown(obj) if self.rtype.custom else _list_item(obj)


def _parse_resource_path(segments: list[str], served: Sequence[ResourceType]) -> _Route | None:
    if segments[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        group, version, rest = segments[1], segments[2], segments[3:]
    else:
        return None
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
        namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    rtype = find(group, version, rest[0], served)
    if rtype is None or (namespace is not None and not rtype.namespaced):
        return None
    name = rest[1] if len(rest) >= 2 else None
    if name is not None and rtype.namespaced and namespace is None:
        return None  # a namespaced object needs its namespace in the path
    subresource = rest[2] if len(rest) == 3 else None
    if subresource is not None and subresource not in rtype.subresources:
        return None
    return _Route(rtype, namespace, name, subresource, version)


class KubeApiServer:
    """Start with `start()` (or `with KubeApiServer() as api:`); `url` is where it listens.

    bookmark_interval: seconds between BOOKMARK events on an idle watch that asked for them.
    max_history: how many changes are kept for watches to resume from; older ones are compacted (410).
    anonymous_is_admin: whether a request without a token is the admin (the default, which tests written
    before authentication rely on) or system:anonymous, held to RBAC (auth.py).
    gateway_api: whether the Gateway API CRDs are installed (their kinds are served and discovered); without
    them, a cluster as most are, where their paths answer 404 until `install_gateway_api()`.
    """

    def __init__(self, bookmark_interval: float = 1.0, max_history: int = 10_000, *,
                 anonymous_is_admin: bool = True, gateway_api: bool = True) -> None:
        self.bookmark_interval = bookmark_interval
        self.gateway_api = gateway_api
        self.max_history = max_history
        self.anonymous_is_admin = anonymous_is_admin
        self._tokens = Tokens()
        self._authorizer: rbac.Authorizer | None = None
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._storage: Storage | None = None
        self._admission: Admission | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.SockSite | None = None
        self._fail_remaining = 0
        self._fail_status = 500
        self._hold_remaining = 0
        self._hold_seconds = 0.0
        self._hold_method = ""
        self.holding = 0  # requests held by hold_next_requests now

    # --- lifecycle ---

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "KubeApiServer":
        self._thread = threading.Thread(target=self._serve_forever, name="kube-api-test-server", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None:
            raise RuntimeError("the test API server did not start") from self._startup_error
        if not self._ready.is_set():
            raise RuntimeError("the test API server did not start within 10 s")
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop = None

    def __enter__(self) -> "KubeApiServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve_forever(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        self._loop = loop
        try:
            loop.run_until_complete(self._startup())
        except BaseException as err:  # reported to start()'s caller
            self._startup_error = err
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _startup(self) -> None:
        self._storage = Storage(self.max_history)
        self._authorizer = rbac.Authorizer(self._storage.objects)
        self._admission = Admission(self._storage)
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        # Cancelling a handler when its client goes away is what ends an abandoned watch promptly.
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        await self._listen()

    async def _listen(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        assert self._runner is not None
        self._site = web.SockSite(self._runner, sock)
        await self._site.start()

    async def _shutdown(self) -> None:
        assert self._storage is not None and self._runner is not None
        self._storage.signal_watchers(DROP)
        await self._runner.cleanup()

    def _call(self, fn: Any, *args: Any) -> Any:
        """Run `fn(*args)` on the server's loop thread and return its result."""
        assert self._loop is not None, "the test API server is not running"

        async def call() -> Any:
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(call(), self._loop).result(10)

    @property
    def served_types(self) -> tuple[ResourceType, ...]:
        """The resource types served now: the custom ones only while their CRDs are installed."""
        return tuple(r for r in RESOURCE_TYPES if self.gateway_api or not r.custom)

    def install_gateway_api(self) -> None:
        """Install the Gateway API CRDs: their kinds are served from now on (as `kubectl apply` of them does)."""
        def install() -> None:
            self.gateway_api = True
        self._call(install)

    # --- fault hooks (callable from any thread) ---

    def drop_watches(self) -> int:
        """Cut the connection of every open watch now, as an API server restart does; returns how many."""
        assert self._storage is not None
        return self._call(self._storage.signal_watchers, DROP)

    def refuse_connections(self, seconds: float) -> None:
        """Stop listening and cut every open connection; listen again on the same port after `seconds`."""
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._refuse(seconds), self._loop).result(10)

    async def _refuse(self, seconds: float) -> None:
        assert self._loop is not None and self._runner is not None and self._storage is not None
        site, self._site = self._site, None
        if site is not None:
            await site.stop()  # the listening socket closes: new connections are refused
        self._storage.signal_watchers(DROP)
        server = self._runner.server
        for handler in server.connections if server is not None else []:
            if handler.transport is not None:
                handler.transport.abort()
        self._loop.call_later(seconds, lambda: asyncio.ensure_future(self._listen()))

    @property
    def refusing(self) -> bool:
        return self._site is None

    def fail_next_requests(self, count: int, status: int = 500) -> None:
        """Answer the next `count` requests (of any kind) with `status` and an InternalError Status."""
        def arm() -> None:
            self._fail_remaining, self._fail_status = count, status
        self._call(arm)

    def hold_next_requests(self, count: int, seconds: float, method: str) -> None:
        """Hold the next `count` requests with `method` for `seconds` before handling them, as a slow API server
        does; `holding` counts those held now."""
        def arm() -> None:
            self._hold_remaining, self._hold_seconds, self._hold_method = count, seconds, method
        self._call(arm)

    def expire_history(self, end_watches: bool = False) -> None:
        """Compact the history up to the current resourceVersion: resuming from an older one gets 410 Gone.

        end_watches: also end every open watch with a 410 Expired ERROR event (what a client sees when
        its watch falls behind a compaction), so that it must resume, get 410, and relist.
        """
        assert self._storage is not None
        storage = self._storage

        def expire() -> None:
            storage.compact()
            if end_watches:
                storage.signal_watchers(EXPIRE)
        self._call(expire)

    # --- inspection, for tests ---

    @property
    def resource_version(self) -> int:
        assert self._storage is not None
        return self._call(lambda: self._storage.rv)  # type: ignore[union-attr]

    @property
    def open_watches(self) -> int:
        assert self._storage is not None
        return self._call(lambda: len(self._storage.watchers))  # type: ignore[union-attr]

    @property
    def watches_opened(self) -> int:
        """How many watches were ever opened (a watch counted by open_watches may be one that is ending)."""
        assert self._storage is not None
        return self._call(lambda: self._storage.watches_opened)  # type: ignore[union-attr]

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Every stored object of `kind`, as a GET would return it."""
        rtype = by_kind(kind)
        assert self._storage is not None
        return self._call(lambda: [dict(o) for o in self._storage.objects[rtype].values()])  # type: ignore[union-attr]

    def service_account_token(self, namespace: str, name: str) -> str:
        """A token for an existing ServiceAccount (what a TokenRequest returns); ApiError 404 when it is missing."""
        def issue() -> str:
            assert self._storage is not None
            account = self._storage.get(by_kind("ServiceAccount"), namespace, name)
            return self._tokens.issue(namespace, name, account["metadata"]["uid"])
        return self._call(issue)

    # --- client configuration ---

    def configuration(self, token: str = ADMIN_TOKEN) -> Any:
        """A kubernetes.client.Configuration for this server, authenticating with `token` (the admin's)."""
        from kubernetes import client
        config = client.Configuration()
        config.host = self.url
        config.api_key = {"authorization": f"Bearer {token}"}
        return config

    def write_kubeconfig(self, path: str | Path, token: str = ADMIN_TOKEN) -> str:
        """Write a kubeconfig naming this server (for code that loads one, like the watcher), authenticating
        with `token` (the admin's unless told otherwise); returns the path."""
        import yaml
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": self.url}}],
            "users": [{"name": "test", "user": {"token": token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
        }
        Path(path).write_text(yaml.safe_dump(doc))
        return str(path)

    # --- HTTP ---

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        if self._hold_remaining > 0 and request.method == self._hold_method:
            self._hold_remaining -= 1
            self.holding += 1
            try:
                await asyncio.sleep(self._hold_seconds)
            finally:
                self.holding -= 1
        if self._fail_remaining > 0:
            self._fail_remaining -= 1
            return _error_response(ApiError(self._fail_status, "InternalError",
                                            "Internal error occurred: injected by the test API server"))
        segments = [s for s in request.path.split("/") if s]
        try:
            self._authorize(request)
            discovery = self._discovery(segments)
            if discovery is not None:
                if request.method != "GET":
                    raise errors.method_not_allowed(request.method)
                return _json(discovery)
            route = _parse_resource_path(segments, self.served_types)
            if route is None:
                raise errors.page_not_found()
            return await self._resource(request, route)
        except ApiError as err:
            return _error_response(err)

    def _authorize(self, request: web.Request) -> None:
        """401 for a token that names nobody, 403 (RBAC) for a user who may not do what the request asks."""
        assert self._storage is not None and self._authorizer is not None
        user = self._tokens.authenticate(request.headers.get("Authorization"), self._storage.service_account_uid,
                                         anonymous_is_admin=self.anonymous_is_admin)
        self._authorizer.check(user, rbac.request_attributes(request.method, request.path, request.query))
        request[_USER] = user.name

    def _discovery(self, segments: list[str]) -> dict[str, Any] | None:
        if segments == ["version"]:
            return SERVER_VERSION
        if segments == ["api"]:
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{self.port}"}]}
        if segments == ["api", "v1"]:
            return self._resource_list("", "v1", self.served_types)
        groups = group_versions(self.served_types)
        if segments == ["apis"]:
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [self._group(name, versions) for name, versions in groups.items()]}
        if len(segments) == 2 and segments[0] == "apis" and segments[1] in groups:
            return {"kind": "APIGroup", "apiVersion": "v1", **self._group(segments[1], groups[segments[1]])}
        if len(segments) == 3 and segments[0] == "apis" and segments[2] in groups.get(segments[1], []):
            return self._resource_list(segments[1], segments[2], self.served_types)
        return None

    @staticmethod
    def _group(name: str, versions: list[str]) -> dict[str, Any]:
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        return {"name": name, "versions": entries, "preferredVersion": entries[0]}

    @staticmethod
    def _resource_list(group: str, version: str, served: Sequence[ResourceType]) -> dict[str, Any]:
        resources = []
        for rtype in served:
            if rtype.group != group or version not in rtype.versions:
                continue
            entry = {"name": rtype.plural, "singularName": rtype.kind.lower(), "namespaced": rtype.namespaced,
                     "kind": rtype.kind, "verbs": list(ALL_VERBS)}
            if rtype.short_names:
                entry["shortNames"] = list(rtype.short_names)
            resources.append(entry)
            for subresource in rtype.subresources:
                kind = "TokenRequest" if subresource == "token" else rtype.kind
                entry = {"name": f"{rtype.plural}/{subresource}", "singularName": "", "namespaced": rtype.namespaced,
                         "kind": kind, "verbs": list(SUBRESOURCE_VERBS[subresource])}
                if subresource == "token":
                    entry.update(group="authentication.k8s.io", version="v1")
                resources.append(entry)
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/{version}".lstrip("/"),
                "resources": resources}

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        try:
            return json.loads(raw) if raw else None
        except ValueError as err:
            raise errors.bad_request(f"the request body is not valid JSON: {err}") from None

    @staticmethod
    def _manager(request: web.Request) -> str:
        return request.query.get("fieldManager") or request.headers.get("User-Agent", "unknown").split("/")[0]

    async def _resource(self, request: web.Request, route: _Route) -> web.StreamResponse:
        storage = self._storage
        assert storage is not None
        method, query, rtype = request.method, request.query, route.rtype
        if route.name is None:
            predicate = self._selectors(query, rtype)
            if method == "GET" and _is_true(query.get("watch")):
                return await self._watch(request, route, predicate)
            if method == "GET":
                page = storage.list(rtype, route.namespace, predicate,
                                    resource_version=query.get("resourceVersion", ""),
                                    exact=query.get("resourceVersionMatch") == "Exact",
                                    limit=int(query.get("limit") or 0), continue_token=query.get("continue"))
                meta: dict[str, Any] = {"resourceVersion": str(page.resource_version)}
                if page.continue_token:
                    meta.update({"continue": page.continue_token, "remainingItemCount": page.remaining})
                return _json({"kind": f"{rtype.kind}List", "apiVersion": route.api_version, "metadata": meta,
                              "items": [route.list_item(o) for o in page.items]})
            if method == "POST" and (route.namespace is not None or not rtype.namespaced):
                body, manager, dry_run = await self._body(request), self._manager(request), _dry_run(query)
                warnings = await self._admit(request, rtype, "CREATE", None, lambda: storage.create(
                    rtype, route.namespace, body, manager, dry_run=True))
                return _json(route.shown(storage.create(rtype, route.namespace, body, manager, dry_run=dry_run)), 201,
                             warnings)
            if method == "DELETE":
                doomed = storage.list(rtype, route.namespace, predicate).items
                for obj in doomed:
                    storage.delete(rtype, route.namespace, obj["metadata"]["name"])
                return _json({"kind": f"{rtype.kind}List", "apiVersion": route.api_version,
                              "metadata": {"resourceVersion": str(storage.rv)},
                              "items": [route.list_item(o) for o in doomed]})
            raise errors.method_not_allowed(method)
        if route.subresource == "token":
            if method != "POST":
                raise errors.method_not_allowed(method)
            return _json(self._token_request(route, await self._body(request)), 201)
        if method == "GET":
            return _json(route.shown(storage.get(rtype, route.namespace, route.name)))
        if method in ("PUT", "PATCH"):
            name, manager, dry_run = route.name, self._manager(request), _dry_run(query)
            if method == "PUT":
                body = await self._body(request)

                def write(dry: bool) -> dict[str, Any]:
                    return storage.update(rtype, route.namespace, name, body, status=route.status, manager=manager,
                                          dry_run=dry)
            else:
                apply = self._patcher(request.headers.get("Content-Type", ""), await self._body(request), rtype)

                def write(dry: bool) -> dict[str, Any]:
                    return storage.patch(rtype, route.namespace, name, apply, status=route.status, manager=manager,
                                         dry_run=dry)
            warnings: list[str] = []
            if not route.status:
                old = storage.get(rtype, route.namespace, name)
                warnings = await self._admit(request, rtype, "UPDATE", old, lambda: write(True))
            return _json(route.shown(write(dry_run)), 200, warnings)
        if method == "DELETE" and not route.status:
            options = await self._body(request) or {}
            deleted = storage.delete(rtype, route.namespace, route.name,
                                     options.get("preconditions") if isinstance(options, dict) else None)
            details = {"name": route.name, "kind": rtype.plural, "uid": deleted["metadata"]["uid"]}
            if rtype.group:
                details["group"] = rtype.group
            return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                          "details": details})
        raise errors.method_not_allowed(method)

    async def _admit(self, request: web.Request, rtype: ResourceType, operation: str, old: dict[str, Any] | None,
                     would_store: Any) -> list[str]:
        """The validating webhooks' warnings for this write (`would_store()`: the object it would store); ApiError
        when one denies it (admission.py)."""
        assert self._admission is not None
        if not self._admission.any_for(rtype, operation):
            return []
        return await self._admission.review(rtype, operation, would_store(), old, user=request.get(_USER, ""),
                                            dry_run=_dry_run(request.query))

    @property
    def admission_calls(self) -> int:
        """AdmissionReviews sent to webhooks so far."""
        assert self._admission is not None
        return self._call(lambda: self._admission.calls)  # type: ignore[union-attr]

    def _token_request(self, route: _Route, body: Any) -> dict[str, Any]:
        """TokenRequest (authentication.k8s.io/v1): a token for the ServiceAccount in the path."""
        assert self._storage is not None and route.namespace is not None and route.name is not None
        account = self._storage.get(route.rtype, route.namespace, route.name)
        spec = (body or {}).get("spec") if isinstance(body, dict) else None
        spec = dict(spec) if isinstance(spec, dict) else {}
        spec.setdefault("audiences", ["https://kubernetes.default.svc"])
        spec.setdefault("expirationSeconds", 3600)
        token = self._tokens.issue(route.namespace, route.name, account["metadata"]["uid"])
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + int(spec["expirationSeconds"])))
        return {"kind": "TokenRequest", "apiVersion": "authentication.k8s.io/v1",
                "metadata": {"name": route.name, "namespace": route.namespace,
                             "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
                "spec": spec, "status": {"token": token, "expirationTimestamp": expires}}

    @staticmethod
    def _selectors(query: Any, rtype: ResourceType) -> selectors.Predicate:
        try:
            labels = selectors.label_selector(query.get("labelSelector"))
            fields = selectors.field_selector(query.get("fieldSelector"), rtype.plural)
        except selectors.SelectorError as err:
            raise errors.bad_request(str(err)) from None
        return lambda obj: labels(obj) and fields(obj)

    @staticmethod
    def _patcher(content_type: str, patch: Any, rtype: ResourceType) -> Any:
        media_type = content_type.split(";")[0].strip().lower()
        if rtype.custom and media_type == patches.STRATEGIC_MERGE_PATCH:
            # A custom resource has no Go struct to say how its lists merge.
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                           "media types include: application/json-patch+json, application/merge-patch+json, "
                           "application/apply-patch+yaml")
        apply = {patches.MERGE_PATCH: patches.merge_patch,
                 patches.STRATEGIC_MERGE_PATCH: patches.strategic_merge_patch,
                 patches.JSON_PATCH: patches.json_patch}.get(media_type)
        if apply is None:
            raise errors.unsupported_media_type(media_type)

        def run(obj: dict[str, Any]) -> Any:
            try:
                return apply(obj, patch)
            except patches.PatchError as err:
                raise ApiError(422, "Invalid", f"the server rejected our request due to an error in our "
                               f"request: {err}") from None
        return run

    async def _watch(self, request: web.Request, route: _Route, predicate: selectors.Predicate
                     ) -> web.StreamResponse:
        """A watch: newline-delimited JSON events on a chunked 200 response, as the real server streams them.

        Errors found after the request was accepted (like 410 Gone for a compacted resourceVersion) are
        sent as an ERROR event carrying a Status, not as an HTTP error, as the real server does.
        """
        storage = self._storage
        assert storage is not None and self._loop is not None
        query = request.query
        timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT_SECONDS)
        bookmarks = _is_true(query.get("allowWatchBookmarks"))
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                           "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        try:
            watcher, initial = storage.watch(route.rtype, route.namespace, predicate,
                                             query.get("resourceVersion", ""))
        except ApiError as err:
            await response.prepare(request)
            await response.write(self._event_line("ERROR", err.status()))
            await response.write_eof()
            return response
        try:
            await response.prepare(request)
            if initial:
                await response.write(b"".join(self._event_line(t, route.shown(o)) for t, o in initial))
            return await self._stream(request, response, watcher, timeout, bookmarks, route)
        finally:
            storage.unwatch(watcher)

    async def _stream(self, request: web.Request, response: web.StreamResponse, watcher: Watcher,
                      timeout: float, bookmarks: bool, route: _Route) -> web.StreamResponse:
        assert self._loop is not None and self._storage is not None
        loop, storage = self._loop, self._storage
        deadline = loop.time() + timeout
        next_bookmark = loop.time() + self.bookmark_interval
        while (now := loop.time()) < deadline:
            wait = (min(deadline, next_bookmark) if bookmarks else deadline) - now
            try:
                item = await asyncio.wait_for(watcher.queue.get(), max(wait, 0))
            except asyncio.TimeoutError:
                if bookmarks and loop.time() >= next_bookmark:
                    # The queue is empty, so every change up to the current resourceVersion has been sent.
                    marker = {"kind": watcher.rtype.kind, "apiVersion": route.api_version,
                              "metadata": {"resourceVersion": str(storage.rv)}}
                    await response.write(self._event_line("BOOKMARK", marker))
                    next_bookmark = loop.time() + self.bookmark_interval
                continue
            items = [item] + [watcher.queue.get_nowait() for _ in range(watcher.queue.qsize())]
            lines = []
            for entry in items:
                if entry is DROP:
                    if lines:
                        await response.write(b"".join(lines))
                    if request.transport is not None:
                        request.transport.abort()
                    return response
                if entry is EXPIRE:
                    gone = errors.expired(f"too old resource version: history compacted at {storage.compacted_rv}")
                    lines.append(self._event_line("ERROR", gone.status()))
                    await response.write(b"".join(lines))
                    await response.write_eof()
                    return response
                event_type, obj = entry
                lines.append(self._event_line(event_type, route.shown(obj)))
            await response.write(b"".join(lines))
        await response.write_eof()
        return response

    @staticmethod
    def _event_line(event_type: str, obj: dict[str, Any]) -> bytes:
        return json.dumps({"type": event_type, "object": obj}).encode() + b"\n"
