"""The test API server's storage: objects, one global resourceVersion counter (as etcd has), a bounded
history of changes for watches to resume from, and the open watches.

Everything here runs on the server's event loop thread; nothing awaits between reading and writing, so
no locks are needed. Stored objects are never modified in place: every change stores a new dict, so a
history entry or a queued watch event can hold a reference safely.
"""
from __future__ import annotations

import asyncio
import base64
import copy
import ipaddress
import json
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

from . import crd_schemas, errors, rbac
from .resources import RESOURCE_TYPES, ResourceType, by_kind

Obj = dict[str, Any]
Predicate = Callable[[Obj], bool]
ObjectKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped kinds

INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SERVICE_CIDR = ipaddress.ip_network("10.96.0.0/16")
# Top-level fields that are not "spec" for the generation rule: changes to them do not bump generation.
_NOT_SPEC = frozenset({"metadata", "status", "kind", "apiVersion"})
# metadata the server owns: whatever a client sends for these is overwritten.
_SERVER_METADATA = ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields", "selfLink")

# Markers a watch queue may carry besides events.
DROP = object()      # cut the connection, as a restarted API server or a load balancer would
EXPIRE = object()    # end the watch with a 410 Expired ERROR event


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _spec_part(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in _NOT_SPEC}


def _with_resource_version(obj: Obj, rv: int) -> Obj:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}


@dataclass
class Change:
    rv: int
    rtype: ResourceType
    key: ObjectKey
    old: Obj | None
    new: Obj | None

    @property
    def deleted_object(self) -> Obj:
        """What a DELETED event carries: the last state, stamped with the deletion's resourceVersion."""
        assert self.old is not None
        return _with_resource_version(self.old, self.rv)


@dataclass(eq=False)
class Watcher:
    rtype: ResourceType
    namespace: str | None
    predicate: Predicate
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)

    def selects(self, obj: Obj | None) -> bool:
        if obj is None:
            return False
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self.predicate(obj)

    def offer(self, change: Change) -> None:
        """Queue the event this watcher sees for `change`, if any.

        An object that starts or stops matching the selectors is ADDED or DELETED for this watcher, as the
        real API server's watch cache reports it.
        """
        if change.rtype is not self.rtype:
            return
        was, now = self.selects(change.old), self.selects(change.new)
        if was and now:
            self.queue.put_nowait(("MODIFIED", change.new))
        elif now:
            self.queue.put_nowait(("ADDED", change.new))
        elif was:
            self.queue.put_nowait(("DELETED", change.deleted_object))


@dataclass
class Page:
    items: list[Obj]
    resource_version: int
    continue_token: str | None = None
    remaining: int | None = None


class Storage:
    def __init__(self, max_history: int = 10_000) -> None:
        self.max_history = max_history
        self.rv = 0
        # Changes with rv > compacted_rv are all in `history`; older ones are gone (410 Gone to resume from).
        self.compacted_rv = 0
        self.history: deque[Change] = deque()
        self.objects: dict[ResourceType, dict[ObjectKey, Obj]] = {rtype: {} for rtype in RESOURCE_TYPES}
        self.watchers: set[Watcher] = set()
        self.watches_opened = 0  # ever, so that a test can wait for watches opened after a moment
        self._cluster_ips: set[str] = set()
        self._next_cluster_ip = 10  # offset in SERVICE_CIDR: the low addresses are the API server's and DNS's
        for name in INITIAL_NAMESPACES:
            self.create(by_kind("Namespace"), None, {"metadata": {"name": name}}, "kube-apiserver")

    # --- reads ---

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Obj:
        obj = self.objects[rtype].get((namespace or "", name))
        if obj is None:
            raise errors.not_found(rtype, name)
        return obj

    def _state_at(self, rtype: ResourceType, rv: int) -> dict[ObjectKey, Obj]:
        """The objects of `rtype` as they were at `rv`, undoing the retained history newer than it."""
        if rv < self.compacted_rv:
            raise errors.too_old(rv, self.compacted_rv + 1)
        state = dict(self.objects[rtype])
        for change in reversed(self.history):
            if change.rv <= rv:
                break
            if change.rtype is rtype:
                if change.old is None:
                    state.pop(change.key, None)
                else:
                    state[change.key] = change.old
        return state

    def list(self, rtype: ResourceType, namespace: str | None, predicate: Predicate, *,
             resource_version: str = "", exact: bool = False, limit: int = 0,
             continue_token: str | None = None) -> Page:
        """A list, optionally paged (`limit`/`continue`) from one consistent snapshot, as etcd serves it."""
        start_after: ObjectKey | None = None
        if continue_token:
            snapshot_rv, start_after = _decode_continue(continue_token)
            if snapshot_rv < self.compacted_rv:
                raise errors.expired("The provided continue parameter is too old to display a consistent list "
                                     "result. You can start a new list without the continue parameter.")
            state = self._state_at(rtype, snapshot_rv)
        elif resource_version not in ("", "0"):
            snapshot_rv = _parse_rv(resource_version)
            if snapshot_rv > self.rv:
                raise errors.ApiError(504, "Timeout", f"Too large resource version: {snapshot_rv}, "
                                      f"current resource version: {self.rv}")
            if exact:
                state = self._state_at(rtype, snapshot_rv)
            else:
                state, snapshot_rv = self.objects[rtype], self.rv
        else:
            state, snapshot_rv = self.objects[rtype], self.rv
        keys = sorted(k for k in state if start_after is None or k > start_after)
        selected = [state[k] for k in keys
                    if (namespace is None or k[0] == namespace) and predicate(state[k])]
        if limit and len(selected) > limit:
            last = selected[limit - 1]["metadata"]
            token = _encode_continue(snapshot_rv, (last.get("namespace", ""), last["name"]))
            return Page(selected[:limit], snapshot_rv, token, len(selected) - limit)
        return Page(selected, snapshot_rv)

    def service_account_uid(self, namespace: str, name: str) -> str | None:
        found = self.objects[by_kind("ServiceAccount")].get((namespace, name))
        return found["metadata"]["uid"] if found is not None else None

    # --- writes ---

    def _commit(self, rtype: ResourceType, key: ObjectKey, old: Obj | None, new: Obj | None) -> Obj | None:
        self.rv += 1
        if new is not None:
            new["metadata"]["resourceVersion"] = str(self.rv)
            self.objects[rtype][key] = new
        else:
            del self.objects[rtype][key]
        change = Change(self.rv, rtype, key, old, new)
        self.history.append(change)
        while len(self.history) > self.max_history:
            self.compacted_rv = self.history.popleft().rv
        for watcher in self.watchers:
            watcher.offer(change)
        return new

    def create(self, rtype: ResourceType, namespace: str | None, body: Any, manager: str, *,
               dry_run: bool = False) -> Obj:
        """dry_run: every check and default, then the object that would be stored, not stored (dryRun=All)."""
        obj = self._checked_body(rtype, body)
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name") or ""
        if not name:
            raise errors.invalid(rtype, name, "metadata.name", name, "name or generateName is required")
        if why := rtype.name_error(name):
            raise errors.invalid(rtype, name, "metadata.name", name, why)
        namespace = self._checked_namespace(rtype, namespace, meta)
        key = (namespace or "", name)
        if key in self.objects[rtype]:
            raise errors.already_exists(rtype, name)
        for server_field in _SERVER_METADATA:
            meta.pop(server_field, None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_now(), generation=1)
        meta["managedFields"] = [_managed_field(rtype, manager)]
        _defaults_on_create(rtype, obj, None if dry_run else self)
        rbac.validate(rtype, obj, None)
        crd_schemas.validate(rtype, obj)
        if dry_run:
            return obj
        return self._commit(rtype, key, None, obj)  # type: ignore[return-value]

    def update(self, rtype: ResourceType, namespace: str | None, name: str, body: Any, *, status: bool,
               manager: str, dry_run: bool = False) -> Obj:
        """PUT: replace the object (or only its status, through the status subresource)."""
        old = self.get(rtype, namespace, name)
        incoming = self._checked_body(rtype, body)
        meta = incoming.get("metadata")
        if not isinstance(meta, dict) or meta.get("name") != name:
            raise errors.bad_request(f"the name of the object ({(meta or {}).get('name')}) does not match the "
                                     f"name on the URL ({name})")
        return self._replace(rtype, old, incoming, status=status, manager=manager, dry_run=dry_run)

    def _replace(self, rtype: ResourceType, old: Obj, incoming: Obj, *, status: bool, manager: str,
                 dry_run: bool = False) -> Obj:
        name = old["metadata"]["name"]
        meta = incoming.setdefault("metadata", {})
        sent_rv = meta.get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise errors.conflict(rtype, name, "the object has been modified; please apply your changes to the "
                                  "latest version and try again")
        self._checked_namespace(rtype, old["metadata"].get("namespace"), meta)
        if meta.get("name") != name:
            raise errors.bad_request(f"metadata.name is immutable (was {name!r})")
        if status:
            # The status subresource changes status and nothing else.
            new = copy.deepcopy({k: v for k, v in old.items() if k != "status"})
            if "status" in incoming:
                new["status"] = incoming["status"]
        else:
            new = incoming
            new["metadata"] = {**{k: v for k, v in meta.items() if k not in _SERVER_METADATA},
                               **{k: old["metadata"][k] for k in _SERVER_METADATA if k in old["metadata"]}}
            if rtype.has_status:
                new.pop("status", None)
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
            _defaults_on_update(rtype, new, old)
            rbac.validate(rtype, new, old)
            crd_schemas.validate(rtype, new)
        new["kind"], new["apiVersion"] = rtype.kind, rtype.api_version
        if new == old:
            return old  # a no-op write: no new resourceVersion, no watch event (as etcd's GuaranteedUpdate)
        if _spec_part(new) != _spec_part(old):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        new["metadata"]["managedFields"] = _merge_managed_fields(old["metadata"].get("managedFields"),
                                                                 _managed_field(rtype, manager, status))
        if dry_run:
            return new
        key = (old["metadata"].get("namespace", ""), name)
        return self._commit(rtype, key, old, new)  # type: ignore[return-value]

    def patch(self, rtype: ResourceType, namespace: str | None, name: str,
              apply_patch: Callable[[Obj], Any], *, status: bool, manager: str, dry_run: bool = False) -> Obj:
        old = self.get(rtype, namespace, name)
        patched = apply_patch(copy.deepcopy(old))
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        patched.setdefault("metadata", {})
        return self._replace(rtype, old, self._checked_body(rtype, patched), status=status, manager=manager,
                             dry_run=dry_run)

    def delete(self, rtype: ResourceType, namespace: str | None, name: str,
               preconditions: dict[str, Any] | None = None) -> Obj:
        old = self.get(rtype, namespace, name)
        preconditions = preconditions or {}
        for field_name in ("uid", "resourceVersion"):
            wanted = preconditions.get(field_name)
            if wanted and wanted != old["metadata"].get(field_name):
                raise errors.conflict(rtype, name, f"Precondition failed: {field_name}: {wanted}, "
                                      f"{field_name} in object meta: {old['metadata'].get(field_name)}")
        if rtype.kind == "Namespace":
            # What the namespace controller does, at once: everything inside goes first.
            for inner in RESOURCE_TYPES:
                if inner.namespaced:
                    for key in [k for k in self.objects[inner] if k[0] == name]:
                        self._remove(inner, key)
        self._remove(rtype, (namespace or "", name))
        return old

    def _remove(self, rtype: ResourceType, key: ObjectKey) -> None:
        old = self.objects[rtype][key]
        if rtype.kind == "Service":
            self._cluster_ips.discard((old.get("spec") or {}).get("clusterIP"))
        self._commit(rtype, key, old, None)

    def _checked_body(self, rtype: ResourceType, body: Any) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body must be a {rtype.kind} object")
        obj = copy.deepcopy(body)
        served = [rtype.api_version_at(version) for version in rtype.versions]
        for field_name, expected in (("kind", [rtype.kind]), ("apiVersion", served)):
            if obj.get(field_name) not in (None, "", *expected):
                raise errors.bad_request(f"{field_name} {obj[field_name]!r} does not match the URL: this "
                                         f"endpoint serves {rtype.api_version} {rtype.kind}")
        obj["kind"], obj["apiVersion"] = rtype.kind, rtype.api_version
        return obj

    def _checked_namespace(self, rtype: ResourceType, namespace: str | None, meta: Obj) -> str | None:
        if not rtype.namespaced:
            meta.pop("namespace", None)
            return None
        if meta.get("namespace") and meta["namespace"] != namespace:
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                     "on the request")
        meta["namespace"] = namespace
        if ("", namespace) not in self.objects[by_kind("Namespace")]:
            raise errors.not_found(by_kind("Namespace"), namespace or "")
        return namespace

    def allocate_cluster_ip(self) -> str:
        # From where the last one was taken, going round once: a scan from the start each time made creating
        # 30,000 Services quadratic (most of a benchmark's 16 minutes of setup).
        first, size = 10, SERVICE_CIDR.num_addresses - 11  # no network, low or broadcast address
        for step in range(size):
            offset = first + (self._next_cluster_ip - first + step) % size
            address = str(SERVICE_CIDR.network_address + offset)
            if address not in self._cluster_ips:
                self._cluster_ips.add(address)
                self._next_cluster_ip = offset + 1
                return address
        raise errors.internal_error("the service IP range is full")

    # --- watches ---

    def watch(self, rtype: ResourceType, namespace: str | None, predicate: Predicate,
              resource_version: str) -> tuple[Watcher, list[tuple[str, Obj]]]:
        """Open a watch: the events it must send first, and the Watcher whose queue gets the rest.

        "" or "0": a synthetic ADDED for every current object, then changes. A resourceVersion: every change
        after it (410 Gone when the history no longer reaches back that far).
        """
        watcher = Watcher(rtype, namespace, predicate)
        if resource_version in ("", "0"):
            initial = [("ADDED", obj) for key, obj in sorted(self.objects[rtype].items()) if watcher.selects(obj)]
        else:
            since = _parse_rv(resource_version)
            if since < self.compacted_rv:
                raise errors.too_old(since, self.compacted_rv + 1)
            replay = Watcher(rtype, namespace, predicate)
            for change in self.history:
                if change.rv > since:
                    replay.offer(change)
            initial = [replay.queue.get_nowait() for _ in range(replay.queue.qsize())]
        self.watchers.add(watcher)
        self.watches_opened += 1
        return watcher, initial

    def unwatch(self, watcher: Watcher) -> None:
        self.watchers.discard(watcher)

    def signal_watchers(self, marker: object) -> int:
        for watcher in self.watchers:
            watcher.queue.put_nowait(marker)
        return len(self.watchers)

    def compact(self) -> None:
        """Forget the history up to now: resuming a watch from any earlier resourceVersion gets 410 Gone."""
        self.history.clear()
        self.compacted_rv = self.rv


def _parse_rv(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise errors.bad_request(f"invalid resource version {text!r}: expected a number") from None


def _encode_continue(rv: int, after: ObjectKey) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "after": list(after)}).encode()).decode()


def _decode_continue(token: str) -> tuple[int, ObjectKey]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), (str(data["after"][0]), str(data["after"][1]))
    except (ValueError, KeyError, IndexError, TypeError):
        raise errors.bad_request("invalid continue token") from None


def _managed_field(rtype: ResourceType, manager: str, status: bool = False) -> Obj:
    entry = {"manager": manager, "operation": "Update", "apiVersion": rtype.api_version, "time": _now(),
             "fieldsType": "FieldsV1", "fieldsV1": {}}
    if status:
        entry["subresource"] = "status"
    return entry


def _merge_managed_fields(existing: list[Obj] | None, entry: Obj) -> list[Obj]:
    same = ("manager", "operation", "subresource")
    kept = [e for e in existing or [] if any(e.get(k) != entry.get(k) for k in same)]
    return kept + [entry]


def _defaults_on_create(rtype: ResourceType, obj: Obj, storage: Storage | None) -> None:
    """The defaults and server-side fields a real API server adds on create, for the kinds that have any."""
    name = obj["metadata"]["name"]
    if rtype.custom and rtype.has_status:
        crd_schemas.status_on_create(rtype, obj)
    if rtype.kind == "Namespace":
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    elif rtype.kind in ("Ingress", "Service"):
        obj["status"] = {"loadBalancer": {}}  # status is not settable on create
        if rtype.kind == "Service":
            _service_defaults(obj.setdefault("spec", {}), storage)
    elif rtype.kind == "Secret":
        obj.setdefault("type", "Opaque")
        _fold_string_data(obj)


def _defaults_on_update(rtype: ResourceType, new: Obj, old: Obj) -> None:
    if rtype.kind == "Service":
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        # An allocated cluster IP is kept when an update leaves it out, as the real server does.
        for field_name in ("clusterIP", "clusterIPs"):
            if not spec.get(field_name) and old_spec.get(field_name):
                spec[field_name] = old_spec[field_name]
        _service_defaults(spec, None)
    elif rtype.kind == "Secret":
        new.setdefault("type", old.get("type", "Opaque"))
        _fold_string_data(new)
    elif rtype.kind == "Namespace":
        new["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = new["metadata"]["name"]


def _service_defaults(spec: Obj, storage: Storage | None) -> None:
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if spec["type"] != "ExternalName":
        spec.setdefault("internalTrafficPolicy", "Cluster")
        if storage is not None and not spec.get("clusterIP"):
            spec["clusterIP"] = storage.allocate_cluster_ip()
        if spec.get("clusterIP"):
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            if spec["clusterIP"] != "None":
                spec.setdefault("ipFamilies", ["IPv4"])
                spec.setdefault("ipFamilyPolicy", "SingleStack")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            if "port" in port:
                port.setdefault("targetPort", port["port"])


def _fold_string_data(secret: Obj) -> None:
    """`stringData` is write-only: the server folds it into `data`, base64-encoded."""
    string_data = secret.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
