"""The tables pushed to nginx's Lua without a reload, declared once: each table's entries, their fields, types,
whether they are always sent, and which Lua module reads them.

Python writes every entry through `Record.serialise` (a field it does not declare, or a required one missing, is an
error that names the field; `check_record` checks the values' types, in the tests of every model), and the test in tests/lua/test_schema_fields.py runs the Lua entry builders inside nginx on
an entry with every field set and checks that they read exactly the fields declared here. Adding a field: declare it
here, give it to `serialise` where the model writes the entry, and read it in the Lua module named by its record.

`SCHEMA_VERSION` travels in every push (the "schema" of the whole-table and delta bodies, services/nginxconf/
tables.py); nginx's store.lua refuses a body of another schema with a message naming both, so that a Lua of another
release (a custom --template directory) never reads entries it does not understand. A body without "schema" is
schema 1, the format before it was versioned. Raise the version when a field changes meaning or type, or when the
Lua needs a new field to serve an entry right; a new optional field that older Lua can ignore needs none.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Union

SCHEMA_VERSION = 3


class SchemaError(ValueError):
    """An entry does not fit the schema; the message names the record and field."""


@dataclass(frozen=True)
class Scalar:
    name: str
    python: tuple[type, ...]
    example: Any  # a value the Lua builders accept, for the test that records what they read

    def describe(self) -> str:
        return self.name


STRING = Scalar("string", (str,), "x")
# A URI path: starts with "/" (router.lua refuses other keys).
PATH = Scalar("path", (str,), "/a")
INTEGER = Scalar("integer", (int,), 1)
BOOLEAN = Scalar("boolean", (bool,), True)
# "<ip>:<port>" or "[<ipv6>]:<port>" (balancer.lua refuses an entry with another endpoint).
ENDPOINT = Scalar("endpoint", (str,), "10.0.0.1:80")
OBJECT = Scalar("object", (dict,), {})


@dataclass(frozen=True)
class OneOf:
    values: tuple[Any, ...]

    def describe(self) -> str:
        return " | ".join(map(repr, self.values))


@dataclass(frozen=True)
class Nullable:
    inner: Type

    def describe(self) -> str:
        return f"{self.inner.describe()} | null"


@dataclass(frozen=True)
class ListOf:
    item: Type

    def describe(self) -> str:
        return f"[{self.item.describe()}, ...]"


@dataclass(frozen=True)
class MapOf:
    value: Type
    key: Scalar = STRING

    def describe(self) -> str:
        return f"{{{self.key.describe()}: {self.value.describe()}}}"


@dataclass(frozen=True)
class PairOf:
    """A two-item list: [first, second]."""
    first: Scalar
    second: Type

    def describe(self) -> str:
        return f"[{self.first.describe()}, {self.second.describe()}]"


@dataclass(frozen=True)
class Field:
    name: str
    type: Type
    doc: str = ""
    # Sent only when its value is not one of these (what the Lua takes for a missing field); empty: always sent.
    omit: tuple[Any, ...] = ()
    # False only for a field carried for people reading the pushed tables (state files), which no Lua reads.
    lua_reads: bool = True

    @property
    def required(self) -> bool:
        return not self.omit


@dataclass(frozen=True)
class Record:
    """A JSON object of the pushed tables, read by `reader` (a module under templates/lua/pyngress/)."""
    name: str
    reader: str
    fields: tuple[Field, ...]
    by_name: Mapping[str, Field] = field(init=False, repr=False, compare=False)
    # For serialise, which runs for every route of every host at a full sync: each field's omitted values as
    # (type, value) pairs (by type too: False == 0 in Python, and a flag's False must not stand for an integer's 0),
    # and the required fields.
    _omitted: Mapping[str, frozenset[tuple[type, Any]]] = field(init=False, repr=False, compare=False)
    _required: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", {f.name: f for f in self.fields})
        object.__setattr__(self, "_omitted", {f.name: frozenset(_omitted_key(v) for v in f.omit) for f in self.fields})
        object.__setattr__(self, "_required", tuple(f.name for f in self.fields if f.required))

    def describe(self) -> str:
        return self.name

    def serialise(self, **values: Any) -> dict[str, Any]:
        """The JSON object of this record: each field given, left out when its value is one the field omits (a tuple
        becomes a list). It refuses a field the schema lacks and a required one missing; the values' types are
        checked by check_record, which the tests run over every model they build: the syncer serialises every route
        of every host at each full sync, and a check of each value here made that 12 times slower (23 us a host)."""
        out: dict[str, Any] = {}
        omitted = self._omitted
        for name, value in values.items():
            omits = omitted.get(name)
            if omits is None:
                raise SchemaError(f"{self.name}: field {name!r} is not in the schema; declare it in "
                                  f"services/nginxconf/table_schema.py and read it in {self.reader}")
            kind = type(value)
            if (kind in _SCALAR_TYPES and (kind, value) in omits) or (not value and (kind, _EMPTY) in omits):
                continue
            out[name] = list(value) if kind is tuple else value
        for name in self._required:
            if name not in out:
                raise SchemaError(f"{self.name}: field {name!r} is required")
        return out


Type = Union[Scalar, OneOf, Nullable, ListOf, MapOf, PairOf, Record]


def _one_of(value: Any, values: tuple[Any, ...]) -> bool:
    # By type too: False == 0 in Python, and a flag's False must not stand for an integer's 0.
    return any(type(value) is type(v) and value == v for v in values)


# The types of the scalar values a field may omit, compared as (type, value); an empty container it omits is
# (type, _EMPTY).
_SCALAR_TYPES = frozenset({type(None), bool, int, float, str})
_EMPTY = object()


def _omitted_key(value: Any) -> tuple[type, Any]:
    return (type(value), value if type(value) in _SCALAR_TYPES else _EMPTY)


def _checked(value: Any, type_: Type, where: str, *, deep: bool) -> Any:
    """`value` as JSON (tuples become lists) when it is of `type_`; else SchemaError."""
    if isinstance(type_, Scalar):
        # bool is an int in Python: an integer field takes no boolean, a boolean field no integer.
        if isinstance(value, type_.python) and (type_ is BOOLEAN or not isinstance(value, bool)):
            if type_ is PATH and not str(value).startswith("/"):  # str(): mypy reads `python` as any type
                raise SchemaError(f"{where}: a path must start with /, not {value!r}")
            return value
    elif isinstance(type_, OneOf):
        if _one_of(value, type_.values):
            return value
    elif isinstance(type_, Nullable):
        return None if value is None else _checked(value, type_.inner, where, deep=deep)
    elif isinstance(type_, ListOf):
        if isinstance(value, (list, tuple)):
            return [_checked(item, type_.item, f"{where}[{i}]", deep=deep) for i, item in enumerate(value)]
    elif isinstance(type_, MapOf):
        if isinstance(value, Mapping):
            return {_checked(k, type_.key, f"{where} key", deep=deep): _checked(v, type_.value, f"{where}[{k!r}]", deep=deep)
                    for k, v in value.items()}
    elif isinstance(type_, PairOf):
        if isinstance(value, (list, tuple)) and len(value) == 2:
            return [_checked(value[0], type_.first, f"{where}[0]", deep=deep),
                    _checked(value[1], type_.second, f"{where}[1]", deep=deep)]
    elif isinstance(value, Mapping):  # a Record
        return check_record(type_, value, where) if deep else value
    raise SchemaError(f"{where}: expected {type_.describe()}, got {value!r:.80}")


def check_record(record: Record, value: Mapping[str, Any], where: str | None = None) -> dict[str, Any]:
    """`value` checked against `record` all the way down (nested records too); SchemaError for the first field
    that does not fit."""
    where = where or record.name
    unknown = sorted(set(value) - set(record.by_name))
    if unknown:
        raise SchemaError(f"{where}: fields {unknown} are not in the schema of {record.name}")
    missing = [f.name for f in record.fields if f.required and f.name not in value]
    if missing:
        raise SchemaError(f"{where}: required fields {missing} are missing")
    return {name: _checked(item, record.by_name[name].type, f"{where}.{name}", deep=True)
            for name, item in value.items()}


def records(type_: Type) -> Iterator[Record]:
    """Every record `type_` holds, itself first, each once."""
    seen: set[str] = set()

    def walk(t: Type) -> Iterator[Record]:
        if isinstance(t, Record):
            if t.name in seen:
                return
            seen.add(t.name)
            yield t
            for f in t.fields:
                yield from walk(f.type)
        elif isinstance(t, Nullable):
            yield from walk(t.inner)
        elif isinstance(t, ListOf):
            yield from walk(t.item)
        elif isinstance(t, MapOf):
            yield from walk(t.value)
        elif isinstance(t, PairOf):
            yield from walk(t.second)

    return walk(type_)


# --- the records --------------------------------------------------------------------------------------------------

CLIENT_AUTH = Record("client_auth", "client_auth.lua (configs, check)", (
    Field("ca", STRING, "PEM certificates the client's must chain to"),
    Field("crl", Nullable(STRING), "PEM CRLs"),
    Field("verify", OneOf(("on", "off", "optional", "optional_no_ca"))),
    Field("depth", INTEGER),
    Field("error_page", Nullable(STRING), "where a refused certificate is redirected"),
    Field("pass_certificate", BOOLEAN),
    Field("match_cn", Nullable(STRING), '"CN=<regex>" for the subject DN'),
    Field("close", BOOLEAN, "a refused certificate closes the connection unanswered (a Gateway's frontend "
          "validation)", omit=(False,)),
))

CANARY = Record("canary", "canary.lua (config)", (
    Field("backend", Nullable(STRING)),
    Field("ingress", STRING, "the canary Ingress, for people reading the table", lua_reads=False),
    Field("header", Nullable(STRING)),
    Field("header_value", Nullable(STRING)),
    Field("header_pattern", Nullable(STRING), "a PCRE the header's value must match"),
    Field("cookie", Nullable(STRING)),
    Field("weight", INTEGER),
    Field("weight_total", INTEGER, "at least 1"),
    Field("sticky", BOOLEAN, "affinity-canary-behavior sticky", omit=(False,)),
))

AFFINITY = Record("affinity", "affinity.lua (config)", (
    Field("cookie", STRING),
    Field("mode", STRING, '"balanced" or "persistent"'),
    Field("path", STRING),
    Field("max_age", Nullable(INTEGER)),
    Field("expires", Nullable(INTEGER)),
    Field("secure", BOOLEAN),
    Field("samesite", Nullable(STRING), '"None", "Lax" or "Strict"'),
    Field("conditional_samesite_none", BOOLEAN, omit=(False,)),
    Field("domain", STRING, omit=(None, "")),
    Field("change_on_failure", BOOLEAN, omit=(False,)),
))

ROUTE = Record("route", "router.lua (route_of)", (
    Field("backend", Nullable(STRING), "null: answer 503"),
    Field("profile", STRING, "the named location @profile_<profile>"),
    Field("ingress", STRING, '"namespace/name"'),
    Field("service", STRING, "the metrics' service label", omit=(None, "")),
    Field("rewrite", STRING, "rewrite-target, with $1..$9", omit=(None,)),
    Field("canary", CANARY, omit=(None,)),
    Field("affinity", AFFINITY, omit=(None,)),
    Field("hash_by", STRING, "upstream-hash-by", omit=(None,)),
    Field("default_backend", STRING, "default-backend", omit=(None,)),
    Field("service_port", STRING, "the Ingress's Service port (number or name): X-Service-Port", omit=(None, "")),
    Field("ewma", BOOLEAN, omit=(False,)),
    Field("hash_subset_size", INTEGER, omit=(None, 0)),
    Field("preserve_trailing_slash", BOOLEAN, omit=(False,)),
    Field("port_in_redirects", BOOLEAN, omit=(False,)),
    Field("rewrite_log", BOOLEAN, omit=(False,)),
    Field("otel_enabled", BOOLEAN, "enable-opentelemetry of the route's Ingress (tracing.lua, route_config)",
          omit=(None,)),
    Field("otel_trust", BOOLEAN, "opentelemetry-trust-incoming-span", omit=(None,)),
    Field("otel_name", STRING, "opentelemetry-operation-name", omit=(None, "")),
))

# Gateway API (services/syncer/model/gateway/): a host's HTTPRoute rules, tried before its Ingress paths.
GATEWAY_VALUE_MATCH = Record("gateway_value_match", "gateway.lua (value_matches_of)", (
    Field("name", STRING, "a header name (lower case) or a query parameter name"),
    Field("value", STRING, "the value, or with regex a PCRE that must find a match in it"),
    Field("regex", BOOLEAN, omit=(False,)),
))

GATEWAY_MATCH = Record("gateway_match", "gateway.lua (match_of)", (
    Field("action", INTEGER, "1-based index into the host's gateway actions"),
    Field("scheme", OneOf(("http", "https")), "its listener's: a route of an HTTPS listener only over TLS",
          omit=(None,)),
    Field("port", INTEGER, "its listener's own port: the match holds only there (absent: on the controller's ports)",
          omit=(None,)),
    Field("method", STRING, omit=(None,)),
    Field("headers", ListOf(GATEWAY_VALUE_MATCH), omit=((),)),
    Field("query", ListOf(GATEWAY_VALUE_MATCH), omit=((),)),
))

GATEWAY_HEADER_CHANGES = Record("gateway_header_changes", "gateway.lua (changes_of)", (
    Field("set", ListOf(PairOf(STRING, STRING)), omit=((),)),
    Field("add", ListOf(PairOf(STRING, STRING)), omit=((),)),
    Field("remove", ListOf(STRING), omit=((),)),
))

GATEWAY_MIRROR = Record("gateway_mirror", "gateway.lua (action_of)", (
    Field("backend", STRING, "the mirrored copies' backend"),
    Field("numerator", INTEGER, "the share of requests copied: numerator/denominator", omit=(100,)),
    Field("denominator", INTEGER, omit=(100,)),
))

GATEWAY_REDIRECT = Record("gateway_redirect", "gateway.lua (action_of)", (
    Field("scheme", OneOf(("http", "https")), omit=(None,)),
    Field("hostname", STRING, omit=(None,)),
    Field("port", INTEGER, omit=(None,)),
    Field("path", PATH, omit=(None,)),
    Field("prefix", BOOLEAN, "path replaces the matched prefix, not the whole path", omit=(False,)),
    Field("code", OneOf((301, 302, 303, 307, 308))),
))

# The filters a rule and a backendRef both take (a backendRef's apply after its rule's).
_GATEWAY_FILTERS = (
    Field("redirect", GATEWAY_REDIRECT, omit=(None,)),
    Field("rewrite_host", STRING, omit=(None,)),
    Field("rewrite_path", PATH, omit=(None,)),
    Field("rewrite_prefix", BOOLEAN, "rewrite_path replaces the matched prefix", omit=(False,)),
    Field("request_headers", GATEWAY_HEADER_CHANGES, omit=(None,)),
    Field("response_headers", GATEWAY_HEADER_CHANGES, omit=(None,)),
)

GATEWAY_BACKEND_FILTERS = Record("gateway_backend_filters", "gateway.lua (backend_filters_of)", _GATEWAY_FILTERS)

GATEWAY_BACKEND = Record("gateway_backend", "gateway.lua (action_of)", (
    Field("backend", Nullable(STRING), "null: its share of the requests answers 500"),
    Field("weight", INTEGER),
    Field("service", STRING, "the metrics' service label", omit=(None, "")),
    Field("filters", GATEWAY_BACKEND_FILTERS, "the backendRef's filters, after the rule's", omit=(None,)),
))

GATEWAY_CORS_ORIGIN = Record("gateway_cors_origin", "gateway.lua (cors_of)", (
    Field("scheme", OneOf(("http", "https"))),
    Field("host", STRING, 'a lower-case name, "*.<suffix>" (any labels before it) or "*"'),
    Field("port", INTEGER, "the scheme's own when the origin names none"),
))

GATEWAY_CORS = Record("gateway_cors", "gateway.lua (cors_of)", (
    Field("any_origin", BOOLEAN, 'allowOrigins "*"', omit=(False,)),
    Field("origins", ListOf(GATEWAY_CORS_ORIGIN), omit=((),)),
    Field("methods", ListOf(STRING), '["*"]: the requested method', omit=((),)),
    Field("headers", ListOf(STRING), '["*"]: the requested headers', omit=((),)),
    Field("expose", ListOf(STRING), omit=((),)),
    Field("credentials", BOOLEAN, omit=(False,)),
    Field("max_age", INTEGER, "seconds"),
))

GATEWAY_BUDGET = Record("gateway_budget", "gateway_budget.lua (budget_of)", (
    Field("attempts", INTEGER, "retries after the first try (retry.attempts)", omit=(0,)),
    Field("request_ms", INTEGER, "timeouts.request: the whole request's deadline", omit=(0,)),
    Field("backend_ms", INTEGER, "timeouts.backendRequest: each attempt's timeout", omit=(0,)),
))

GATEWAY_ACTION = Record("gateway_action", "gateway.lua (action_of)", (
    Field("route", STRING, '"namespace/name" of the HTTPRoute'),
    Field("path", STRING, "the metrics' path label: the rule's first path"),
    Field("profile", STRING, "the named location @profile_<profile>"),
    Field("backends", ListOf(GATEWAY_BACKEND), "none (and no redirect): answer 500", omit=((),)),
    *_GATEWAY_FILTERS,
    Field("mirrors", ListOf(GATEWAY_MIRROR), "RequestMirror: copy i goes to the profile's mirror location i",
          omit=((),)),
    Field("cors", GATEWAY_CORS, "the CORS filter: preflights answered, response headers added", omit=(None,)),
    Field("budget", GATEWAY_BUDGET, "retry and timeouts, spent by the balancer (gateway_budget.lua)", omit=(None,)),
))

GATEWAY_LAYER = Record("gateway_layer", "gateway.lua (layer_of)", (
    Field("exact", MapOf(ListOf(GATEWAY_MATCH), key=PATH), omit=({},)),
    Field("prefix", ListOf(PairOf(PATH, ListOf(GATEWAY_MATCH))), "longest first", omit=((),)),
    Field("regex", ListOf(PairOf(STRING, ListOf(GATEWAY_MATCH))), "PCREs matching the whole path", omit=((),)),
))

GATEWAY_ROUTES = Record("gateway_routes", "gateway.lua (routes_of)", (
    Field("layers", ListOf(GATEWAY_LAYER), "the routes of the host itself, then of wildcards, then of any host"),
    Field("actions", ListOf(GATEWAY_ACTION)),
    Field("https_listeners", ListOf(STRING), "the hostnames of the HTTPS listeners (\"\" for none) when several: a "
          "request whose Host one takes and its SNI another answers 421", omit=((),)),
    Field("client_auth", CLIENT_AUTH, "the HTTPS listener's client-certificate validation, checked over TLS by "
          "router.lua (host_of) before a rule serves", omit=(None,)),
))

HOST_ROUTES = Record("host_routes", "router.lua (host_of)", (
    Field("exact", MapOf(ROUTE, key=PATH)),
    Field("prefix", ListOf(PairOf(PATH, ROUTE)), "longest first (regex: tried in this order)"),
    Field("default", Nullable(ROUTE)),
    Field("regex", BOOLEAN, "use-regex: prefix paths are case-insensitive PCREs", omit=(False,)),
    Field("app_root", STRING, omit=(None, "")),
    Field("redirect_host", STRING, "from-to-www-redirect", omit=(None, "")),
    Field("tls", BOOLEAN),
    Field("ssl_redirect", BOOLEAN),
    Field("force_ssl_redirect", BOOLEAN),
    Field("hsts", Nullable(STRING), "the Strict-Transport-Security value"),
    Field("client_auth", MapOf(CLIENT_AUTH), "Ingress -> its client-certificate check", omit=(None, {})),
    Field("redirect_code", OneOf((301, 302, 307, 308)), "hosts that may redirect", omit=(None,)),
    Field("no_tls_redirect", ListOf(STRING), "path prefixes kept on HTTP", omit=(None,)),
    Field("gateway", GATEWAY_ROUTES, "HTTPRoute rules, tried before the Ingress paths", omit=(None,)),
))

CERTIFICATE = Record("certificate", "certificates.lua (checked_digest)", (
    Field("cert", STRING, "PEM chain"),
    Field("key", STRING, "PEM private key"),
))

CERTIFICATES = Record("certificates", "certificates.lua (build)", (
    Field("certs", MapOf(CERTIFICATE), "certificate id -> PEMs"),
    Field("hosts", MapOf(STRING), "host or *.wildcard -> certificate id"),
    Field("default", Nullable(STRING), "certificate id"),
))


@dataclass(frozen=True)
class Table:
    """One pushed table. Keyed: each key's value is an `entry` (pushed whole or by deltas); else the whole table is
    one `entry`."""
    name: str
    keyed: bool
    entry: Type
    reader: str


TABLES: Mapping[str, Table] = {t.name: t for t in (
    Table("routes", keyed=True, entry=HOST_ROUTES, reader="router.lua"),
    Table("backends", keyed=True, entry=ListOf(ENDPOINT), reader="balancer.lua"),
    Table("certificates", keyed=False, entry=CERTIFICATES, reader="certificates.lua"),
)}

# Not pushed to the Lua but read beside it: the stream servers' endpoints (paths.py's stream_endpoints file), which
# templates/njs/stream.js reads per connection; the backends table's format.
STREAM_ENDPOINTS = Table("stream_endpoints", keyed=True, entry=ListOf(ENDPOINT), reader="templates/njs/stream.js")

# The bodies of POST /configuration/<table> (and the state files) and POST /configuration/<table>/delta (and the
# journals), as store.lua reads them. tables.py writes them as bytes (their data is canonical JSON already).
WHOLE_BODY = Record("whole_body", "store.lua (put)", (
    Field("version", STRING, "SHA-256 of the data's canonical JSON"),
    Field("schema", INTEGER, "SCHEMA_VERSION"),
    Field("data", OBJECT, "the table"),
))
DELTA_BODY = Record("delta_body", "store.lua (put_delta)", (
    Field("base", STRING, "the version the delta applies to"),
    Field("version", STRING),
    Field("schema", INTEGER, "SCHEMA_VERSION"),
    Field("set", OBJECT, "key -> new entry"),
    Field("delete", ListOf(STRING), "keys removed"),
))


def check_table(name: str, table: Mapping[str, Any]) -> dict[str, Any]:
    """A whole table checked against its schema all the way down; SchemaError naming the first key and field that
    does not fit."""
    spec = TABLES[name]
    if not spec.keyed:
        assert isinstance(spec.entry, Record)
        return check_record(spec.entry, table)
    return {key: _checked(entry, spec.entry, f"{name}[{key!r}]", deep=True) for key, entry in table.items()}
