"""The tables nginx's Lua routes by (routes, backends, certificates), pushed without a reload.

Each table goes to `<state-dir>/dynamic/<table>.json` (0600, read by a freshly started master) and, when
nginx does not hold that version yet, to `POST /configuration/<table>` on nginx's configuration socket (a
Unix socket only root can open, see paths.py). A table's version is the SHA-256 of its canonical JSON, so an
unchanged table is never sent twice and a restarted nginx reports what it loaded.

The tables then change by deltas: only the entries that differ from what nginx holds, to
`POST /configuration/<table>/delta`, versioned by the SHA-256 of the version they apply to and their canonical JSON.
The keyed tables' entries are their keys (routes by host, backends by name); the certificates table's are
"certs/<id>", "hosts/<host>" and "default" (certificates_delta: one certificate of 10,000 moves that one, not 25 MB). nginx refuses a delta to another version than it holds (a restart, another pusher)
and the whole table goes instead. A POST nginx does not answer in time (tens of MB at 100,000 hosts, on a loaded
machine) is not sent again while nginx reports taking it (`taking` in /configuration/versions), and once nginx holds
its version the next push goes on from it. The state files follow each delta at once (table_state_files.py journals it): a
master killed and started again must find the tables it served, or it answers 404 until the next repush.

nginx applies every entry of a push that its Lua can build and refuses the others alone (a regex PCRE refuses, a
certificate OpenSSL cannot use): each refused key keeps its last good value there (or stays absent), and nginx
answers which keys it refuses and why. `TablePusher.refused` is that answer, for the tables nginx holds now.

The formats are declared in table_schema.py (and read by templates/lua/pyngress/{router,balancer,certificates}.lua);
backends hold addresses only (names are resolved before they get here). Every body carries the schema's version, and
nginx refuses a body of another version whole (NginxPushError), so a Lua of another release never half-reads one.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Mapping

import aiohttp

from services.common import changed_keys
from services.common.canonical import canonical_json
from services.common.changed_keys import ChangedKeys
from services.nginxconf import config_api
from services.nginxconf.config_api import NginxUnavailableError
from services.nginxconf.paths import DYNAMIC_TABLES, NginxPaths
from services.nginxconf.table_schema import SCHEMA_VERSION
from services.nginxconf.table_state_files import TableStateFiles


class NginxPushError(RuntimeError):
    """nginx refused a pushed table whole (its body was malformed); the message is nginx's reason."""


class _StaleBase(NginxPushError):
    """nginx holds another version than the one a delta applies to."""


KEYED_TABLES = frozenset({"routes", "backends"})
DELTA_TABLES = KEYED_TABLES | {"certificates"}
# nginx's Lua takes a whole table in entry by entry before it answers: the routes of 100,000 hosts (tens of MB)
# took longer than the configuration API's 30 s, and a push that always times out is retried forever, serving
# nothing. A POST may take 30 s plus this long per MB of its body.
POST_SECONDS_PER_MB = 2.0
_MISSING = object()
# In GET /configuration/versions: the tables whose whole body a worker is taking in right now (api.lua).
TAKING = "taking"


def post_timeout(body_bytes: int) -> float:
    """Seconds a POST of `body_bytes` to the configuration API may take."""
    return config_api.HTTP_TIMEOUT_SECONDS + POST_SECONDS_PER_MB * body_bytes / 1e6


def table_delta(last: Mapping[str, Any], new: Mapping[str, Any],
                keys: Iterable[str] | None = None) -> dict[str, Any] | None:
    """The entries of `new` that differ from `last` and the keys it no longer has; None when equal. `keys`: the
    only keys at which they may differ (None: any). Entries kept from one push to the next are the same objects, so
    most are compared by identity."""
    if keys is None:
        changed = {key: value for key, value in new.items()
                   if (old := last.get(key, _MISSING)) is not value and old != value}
        removed = sorted(key for key in last if key not in new)
    else:
        changed = {key: value for key in keys
                   if (value := new.get(key, _MISSING)) is not _MISSING
                   and (old := last.get(key, _MISSING)) is not value and old != value}
        removed = sorted(key for key in keys if key in last and key not in new)
    return {"set": changed, "delete": removed} if changed or removed else None


def certificates_delta(last: Mapping[str, Any], new: Mapping[str, Any],
                       keys: Iterable[str] | None = None) -> dict[str, Any] | None:
    """The entries of the certificates table `new` that differ from `last` ("certs/<id>", "hosts/<host>",
    "default") and those it no longer has; None when equal. `keys`: the only entries, so named, at which they may
    differ (None: any). Kept certificates are the same objects (model/tls.py), compared by identity."""
    names: dict[str, list[str]] | None = None
    if keys is not None:
        names = {"certs": [], "hosts": []}
        for key in keys:
            part, _, name = key.partition("/")
            if part in names:
                names[part].append(name)
    changed: dict[str, Any] = {}
    removed: list[str] = []
    for part in ("certs", "hosts"):
        delta = table_delta(last.get(part) or {}, new.get(part) or {}, None if names is None else names[part])
        if delta is not None:
            changed.update((f"{part}/{key}", value) for key, value in delta["set"].items())
            removed += (f"{part}/{key}" for key in delta["delete"])
    if last.get("default") != new.get("default"):
        changed["default"] = new.get("default")
    return {"set": changed, "delete": sorted(removed)} if changed or removed else None


def apply_delta(table: dict[str, Any], delta: dict[str, Any]) -> None:
    """`table` (keyed) changed in place as `delta` (table_delta's) says."""
    table.update(delta["set"])
    for key in delta["delete"]:
        table.pop(key, None)


# Every body names the schema its entries follow (table_schema.py): a Lua of another release refuses it whole.
_SCHEMA = b'"schema":' + str(SCHEMA_VERSION).encode()


def _envelope(version: str, data: bytes) -> bytes:
    """A whole table's body (and state file, table_schema.WHOLE_BODY): its version, schema and canonical JSON."""
    return b'{"version":"' + version.encode() + b'",' + _SCHEMA + b',"data":' + data + b"}"


Taken = Callable[[], Awaitable[None]]


@dataclass
class _Unanswered:
    """A POST nginx did not answer (in time): the version it makes, and what follows once nginx holds it."""
    version: str
    taken: Taken


class TablePusher:
    def __init__(self, paths: NginxPaths) -> None:
        self.paths = paths
        self._lock = asyncio.Lock()
        self._state = TableStateFiles(paths)
        self._pushed: dict[str, str] = {}   # table → version nginx acknowledged
        # Table → what that version holds: of a keyed table the pusher's own copy (a caller may change its keyed
        # tables in place), brought to each delta sent by that delta's entries alone; the certificates table is made
        # anew at each change (model/tls.py), never changed in place, and kept as it came.
        self._sent: dict[str, Mapping[str, Any]] = {}
        # Table → the keys at which the tables pushed since may differ from what was sent (None: any key); of the
        # certificates table, its entries as certificates_delta names them.
        self._unsent: dict[str, ChangedKeys] = {}
        self._refused: dict[str, dict[str, str]] = {}  # table → key → why nginx does not serve that entry as sent
        # Table → its POST that got no answer (in time): nginx may take it all the same, and once it holds that
        # version the next push goes on from it rather than sending the whole table again.
        self._unanswered: dict[str, _Unanswered] = {}

    @property
    def unanswered(self) -> bool:
        """Whether a push nginx did not answer (in time) may still be taken by nginx."""
        return bool(self._unanswered)

    @property
    def refused(self) -> Mapping[str, Mapping[str, str]]:
        """The entries of the tables nginx holds that its Lua refused (table → key → nginx's reason), as of the last
        push; those keys keep their last good value in nginx, or are absent."""
        return self._refused

    async def push(self, *, routes: Mapping[str, Any], backends: Mapping[str, list[str]],
                   certificates: Mapping[str, Any], changed: Mapping[str, ChangedKeys] | None = None) -> list[str]:
        """Bring nginx's tables to these, without a reload; the names of the tables nginx did not hold yet.

        `changed`: for each table, the keys at which it may differ from the last push's (None or left out: at any
        key; of the certificates table, its entries as certificates_delta names them). Only those keys are compared,
        so that a push of one host's change costs the same at any size.

        A table's state file is replaced once nginx has taken it, or when nginx does not answer (so that
        a starting nginx loads it). Raises NginxUnavailableError when nginx does not answer, and
        NginxPushError when nginx refuses a table: nginx and the state file keep the last good one.
        """
        tables = {"routes": routes, "backends": backends, "certificates": certificates}
        async with self._lock:
            for name in DELTA_TABLES:
                self._unsent[name] = changed_keys.union(self._unsent.get(name), (changed or {}).get(name))
            pushed = []
            async with self._session() as session:
                try:
                    held = await self._get(session, "/configuration/versions")
                except NginxUnavailableError:
                    for name in DYNAMIC_TABLES:
                        version, body = self._whole(name, tables[name])
                        await self._state.keep_whole(name, version=version, body=body)
                    raise
                for name in DYNAMIC_TABLES:  # backends before the routes that may name them
                    await self._settle_unanswered(session, name, held)
                    table, base = tables[name], self._pushed.get(name)
                    if base is not None and held.get(name) == base and name in self._sent:
                        delta = self._delta(name, table)
                        if delta is None:
                            self._sent_now(name, version=base)  # nginx holds it already
                            continue
                        if name in DELTA_TABLES and await self._push_delta(session, name, base, delta, table):
                            pushed.append(name)
                            continue
                    version, body = self._whole(name, table)
                    taken = self._whole_taken(name, version, _own(name, table), body)
                    if held.get(name) != version:
                        await self._post(session, name, f"/configuration/{name}", body=body, version=version,
                                         taken=taken)
                        pushed.append(name)
                    await taken()
                if self._refused.keys() < set(DYNAMIC_TABLES):
                    # Tables nginx held already when this pusher started (a syncer restart): it knows their refusals.
                    self._refused = {**await self._get(session, "/configuration/refused"), **self._refused}
            return pushed

    async def _settle_unanswered(self, session: aiohttp.ClientSession, name: str, held: Mapping[str, Any]) -> None:
        """After a POST of `name` got no answer (in time): once nginx holds its version, what it sent is what nginx
        holds (the keys changed since the last answered push, still in _unsent, cover those changed since); while
        nginx is still taking it, NginxUnavailableError, rather than sending tens of MB again beside it; else (nginx
        refused it, or restarted) it is forgotten."""
        unanswered = self._unanswered.get(name)
        if unanswered is None:
            return
        if held.get(name) == unanswered.version:
            del self._unanswered[name]
            unsent = self._unsent.get(name)
            await unanswered.taken()
            self._unsent[name] = unsent  # what changed since the last answered push, this push's change included
            self._refused[name] = (await self._get(session, "/configuration/refused"))[name]
        elif name in _taking(held):
            raise NginxUnavailableError(f"nginx is still taking the {name} table sent before; the push waits for it")
        else:
            del self._unanswered[name]

    def _whole_taken(self, name: str, version: str, sent: Mapping[str, Any], body: bytes) -> Taken:
        """What follows once nginx holds the whole table `sent` as `version`."""
        async def taken() -> None:
            self._sent[name] = sent
            self._sent_now(name, version=version)
            await self._state.keep_whole(name, version=version, body=body)
        return taken

    def _delta(self, name: str, table: Mapping[str, Any]) -> dict[str, Any] | None:
        """What `table` changes of the one nginx holds (None: nothing)."""
        if name == "certificates":
            return certificates_delta(self._sent[name], table, self._unsent.get(name))
        return table_delta(self._sent[name], table, self._unsent.get(name))

    def _sent_now(self, name: str, *, version: str) -> None:
        """nginx holds `_sent[name]` as `version`."""
        self._pushed[name] = version
        if name in DELTA_TABLES:
            self._unsent[name] = frozenset()

    @staticmethod
    def _whole(name: str, table: Mapping[str, Any]) -> tuple[str, bytes]:
        data = canonical_json(_plain(name, table))
        version = hashlib.sha256(data).hexdigest()
        return version, _envelope(version, data)

    async def _push_delta(self, session: aiohttp.ClientSession, name: str, base: str, delta: dict[str, Any],
                          table: Mapping[str, Any]) -> bool:
        """Send `delta` (to `table` from version `base`, which nginx holds); False when nginx has moved on and
        the whole table must go."""
        data = canonical_json(delta)
        version = hashlib.sha256(base.encode() + data).hexdigest()
        body = b'{"base":"' + base.encode() + b'","version":"' + version.encode() + b'",' + _SCHEMA + b',' + data[1:]

        async def taken() -> None:
            if name in KEYED_TABLES:
                apply_delta(self._sent[name], delta)  # type: ignore[arg-type]  # the pusher's own copy (_own), a dict
            else:
                self._sent[name] = table
            self._sent_now(name, version=version)
            if not self._state.append(name, base=base, version=version, delta=body):
                whole = await asyncio.to_thread(canonical_json, _plain(name, table))
                await self._state.keep_whole(name, version=version, body=_envelope(version, whole))
        try:
            await self._post(session, name, f"/configuration/{name}/delta", body=body, version=version, taken=taken)
        except _StaleBase:
            return False
        await taken()
        return True

    async def needs_push(self) -> bool:
        """True when nginx holds other tables than the last push (or nothing was pushed yet).

        Once a push under way is over: halfway through one, nginx holds some of its tables and not yet the others
        (before the first, none), and the syncer's check for a restarted nginx would push everything once more
        (at 100,000 Ingresses, the first push of tens of MB again)."""
        async with self._lock:
            held = await self.versions()
            if not _taking(held).isdisjoint(self._unanswered):
                return False  # nginx is still taking a push it did not answer in time: a later check looks again
            return (not self._pushed or bool(self._unanswered)
                    or any(held.get(name) != version for name, version in self._pushed.items()))

    async def versions(self) -> dict[str, str | None]:
        """The version of each table nginx holds (None for a table it has not received)."""
        async with self._session() as session:
            return await self._get(session, "/configuration/versions")

    def _session(self) -> aiohttp.ClientSession:
        return config_api.session(self.paths)

    async def _get(self, session: aiohttp.ClientSession, path: str) -> dict[str, Any]:
        try:
            async with session.get(path) as response:
                if response.status != 200:
                    raise NginxUnavailableError(f"nginx answered {response.status} for {path}")
                return await response.json()
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as err:
            raise NginxUnavailableError(f"nginx does not answer on {self.paths.config_socket}: {err}") from err

    async def _post(self, session: aiohttp.ClientSession, name: str, path: str, *, body: bytes, version: str,
                    taken: Taken) -> None:
        """POST a table or a delta making `version` of table `name`; keeps the entries nginx refuses (key → its
        reason). Until nginx answers, `taken` is what follows should nginx take it all the same (_settle_unanswered)."""
        timeout = post_timeout(len(body))
        self._unanswered[name] = _Unanswered(version, taken)
        try:
            async with session.post(path, data=body, timeout=aiohttp.ClientTimeout(total=timeout),
                                    headers={"Content-Type": "application/json"}) as response:
                # nginx's messages quote PCRE's from a byte offset on, which may start inside a UTF-8 character.
                text = (await response.read()).decode("utf-8", "replace")
        except asyncio.TimeoutError as err:  # its message is empty: say what happened
            raise NginxUnavailableError(f"pushing {name} to nginx failed: no answer within {timeout:.3g} s to a body "
                                        f"of {len(body) / 1e6:.1f} MB") from err
        except aiohttp.ClientConnectionError as err:
            raise NginxUnavailableError(f"pushing {name} to nginx failed: {err}") from err
        del self._unanswered[name]
        if response.status == 409:
            raise _StaleBase(f"nginx holds another version of {name}")
        if response.status != 201:
            try:
                reason = json.loads(text)["error"]
            except (ValueError, KeyError, TypeError):
                reason = text.strip() or f"status {response.status}"
            raise NginxPushError(f"nginx refused {name}: {reason}")
        try:
            self._refused[name] = json.loads(text)["refused"]
        except (ValueError, KeyError, TypeError) as err:
            raise NginxPushError(f"nginx took {name} but its answer does not list refused entries: {text!r}") from err


def _taking(held: Mapping[str, Any]) -> frozenset[str]:
    """The tables nginx says a worker is taking in right now, from its /configuration/versions answer."""
    return frozenset(held.get(TAKING) or ())


def _own(name: str, table: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the pusher keeps of a table it sent whole (see TablePusher._sent)."""
    return dict(table) if name in KEYED_TABLES else table


def _plain(name: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """`table` as canonical_json writes it: dicts. The model hands out its large tables, and the certificates table's
    parts, as snapshots of a table it keeps (model/layered.py): a whole push copies them."""
    if name == "certificates":
        return {part: dict(value) if isinstance(value, Mapping) and not isinstance(value, dict) else value
                for part, value in table.items()}
    return table if isinstance(table, dict) else dict(table)
