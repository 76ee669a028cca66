"""The assertion that no value reached nginx.conf as anything but the arguments it was meant to be.

Given an NginxConfig and the text render() made of it, read the text back as nginx does
(nginx_conf_tree.py) and compare it with the configuration rendered without any of its values (no location
profiles, no ConfigMap globals, the same switches):
- outside the profiles' named locations and the http-level settings, the two trees are the same (no value
  added or removed a directive, a block or a Lua block anywhere else);
- each profile's location holds exactly its directives, each with exactly its value's words as arguments,
  beside the directives that the template writes into every profile location;
- each http-level setting is one directive whose arguments are its value's words;
- the typed fields written beside them are exactly what their values say: a rate limit's geo/map/zone
  directives at the http level and its limit_req/limit_conn in its location, a profile's denied networks,
  the ConfigMap's block lists (geo/map at the http level, an `if` returning 403 in the server). A profile's
  configuration-snippet may hold any directives, but only inside its own location.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import re
from collections import Counter

from services.nginxconf.config import DEFAULT_PROFILE, BlockLists, NginxConfig, RateLimit
from services.nginxconf.modsecurity import MODULE as MODSECURITY_MODULE
from services.nginxconf.render import BACKEND_TLS_DIRECTIVES, directive_arguments, http_level_settings, render
from services.nginxconf.template import BUILTIN_DIR, MAIN_TEMPLATE
from tests.support.nginx_conf_tree import Directive, parse, walk, words

PROFILE_PREFIX = "@profile_"
# Directives the template writes in a profile location for its typed fields (CORS's Lua, the https scheme):
# read from the template's own text, so that a new typed field needs no change here.
# `{{ to_backend }}_pass` stands for proxy_pass and grpc_pass.
_TEMPLATE_TEXT = (BUILTIN_DIR / MAIN_TEMPLATE).read_text()
_TEMPLATE_NAMES = {word for line in _TEMPLATE_TEXT.splitlines() if line.strip()
                   for word in [line.split()[0].rstrip(";")] if word.replace("_", "").isalpha()}
_TEMPLATE_NAMES |= {f"{module}_{rest}" for rest in re.findall(r"\{\{ to_backend \}\}_([a-z_]+)", _TEMPLATE_TEXT)
                    for module in ("proxy", "grpc")}
_TEMPLATE_NAMES |= {f"{module}_ssl_{directive}" for directive in BACKEND_TLS_DIRECTIVES for module in ("proxy", "grpc")}
# A verified backend's profile turns TLS session reuse off (services/nginxconf/render.py, backend TLS).
_TEMPLATE_NAMES |= {f"{module}_ssl_session_reuse" for module in ("proxy", "grpc")}
# A profile's ModSecurity lines (services/nginxconf/modsecurity.py writes them whole; the snippet is one argument).
_TEMPLATE_NAMES |= {"modsecurity", "modsecurity_rules", "modsecurity_transaction_id"}


def _http(tree: list[Directive]) -> Directive:
    [http] = [d for d in tree if d.name == "http"]
    return http


def _profile_location(directive: Directive) -> str | None:
    """The profile whose named location this is (auth-keepalive's profiles have a second one for HTTP/2)."""
    if directive.name == "location" and directive.args and directive.args[0].startswith(PROFILE_PREFIX):
        return directive.args[0][len(PROFILE_PREFIX):].removesuffix(HTTP2_SUFFIX)
    return None


def _shape(d: Directive) -> tuple:
    return (d.name, tuple(d.args), d.lua, tuple(_shape(inner) for inner in d.block) if d.block is not None else None)


def _typed(d: Directive) -> bool:
    """Whether `d` (in http or in the server) is written for a rate limit or a block list."""
    if d.name in ("limit_req_zone", "limit_conn_zone"):
        return True
    if d.name in ("geo", "map", "if"):
        return any(arg.lstrip("(").startswith(("$pyngress_limit_", "$pyngress_blocked_")) for arg in d.args)
    return False


def _rate_limit_zones(limit: RateLimit) -> list[tuple]:
    var_id = hashlib.sha256(limit.zone.encode()).hexdigest()[:16]
    allowed, key = f"$pyngress_limit_allowed_{var_id}", f"$pyngress_limit_key_{var_id}"
    shapes = [("geo", (allowed,), None, (("default", ("0",), None, None),
                                         *((network, ("1",), None, None) for network in limit.allowlist))),
              ("map", (allowed, key), None, (("0", ("$binary_remote_addr",), None, None), ("1", ("",), None, None)))]
    if limit.connections:
        shapes.append(("limit_conn_zone", (key, f"zone={limit.zone}_conn:5m"), None, None))
    for suffix, count, unit in (("rps", limit.rps, "s"), ("rpm", limit.rpm, "m")):
        if count:
            shapes.append(("limit_req_zone", (key, f"zone={limit.zone}_{suffix}:5m", f"rate={count}r/{unit}"), None,
                           None))
    return shapes


def _rate_limits_in_location(limit: RateLimit) -> Counter:
    limits: Counter = Counter()
    if limit.connections:
        limits["limit_conn", (f"{limit.zone}_conn", str(limit.connections))] += 1
    for suffix, count in (("rps", limit.rps), ("rpm", limit.rpm)):
        if count:
            burst = (f"burst={count * limit.burst_multiplier}",) if limit.burst_multiplier else ()
            limits["limit_req", (f"zone={limit.zone}_{suffix}", *burst, "nodelay")] += 1
    return limits


def _block_lists(blocked: BlockLists) -> tuple[list[tuple], list[tuple]]:
    """The http-level and the server-level shapes of the block lists."""
    http, server = [], []
    lists = (("geo", "$pyngress_blocked_address", (), blocked.networks),
             ("map", "$pyngress_blocked_user_agent", ("$http_user_agent",), blocked.user_agents),
             ("map", "$pyngress_blocked_referer", ("$http_referer",), blocked.referers))
    for kind, variable, source, entries in lists:
        if entries:
            keys = entries if kind == "geo" else [e if e.startswith("~") else "\\" + e for e in entries]
            http.append((kind, (*source, variable), None, (("default", ("0",), None, None),
                                                          *((k, ("1",), None, None) for k in keys))))
            server.append(("if", (f"({variable})",), None, (("return", ("403",), None, None),)))
    return http, server


def _typed_shapes(tree: list[Directive]) -> Counter:
    return Counter(_shape(d) for path, d in walk(tree) if path in (("http",), ("http", "server")) and _typed(d))


# What a profile's external auth (or mirror) adds beside its location: the internal location of its auth
# (mirror) subrequest, the named location of its signin redirect, and (at http level) the cache of auth answers
# and the upstream of auth-keepalive.
_AUTH_LOCATION = re.compile(r"(?:= /_pyngress_auth_|= /_pyngress_mirror_|@pyngress_signin_)([A-Za-z0-9_-]+)")
_AUTH_UPSTREAM = re.compile(r"pyngress_auth_([A-Za-z0-9_-]+)")
_ERROR_LOCATION = re.compile(r"@pyngress_error_[45][0-9]{2}")
HTTP2_SUFFIX = "_http2"
AUTH_CACHE_ZONE = "keys_zone=pyngress_auth_cache:10m"


def _auth_location(directive: Directive) -> str | None:
    """The profile whose external auth made this location, if it is one."""
    if directive.name == "location" and (match := _AUTH_LOCATION.fullmatch(" ".join(directive.args))):
        return match[1]
    if directive.name == "upstream" and (match := _AUTH_UPSTREAM.fullmatch(" ".join(directive.args))):
        return match[1]
    return None


def _is_auth_cache(directive: Directive) -> bool:
    return directive.name == "proxy_cache_path" and AUTH_CACHE_ZONE in directive.args


def _without_values(block: list[Directive], settings: set[str], *, in_http: bool,
                    host_servers: frozenset[str] = frozenset()) -> list[tuple]:
    """`block` as comparable tuples, less the profile locations, the typed fields' directives, (directly in http)
    the settings and the server blocks of `host_servers` (checked by _assert_host_servers); the Lua of
    init_by_lua_block (it lists the profiles) only by name."""
    kept = []
    for d in block:
        if (_profile_location(d) not in (None, DEFAULT_PROFILE)) or (in_http and d.name in settings) or _typed(d):
            continue
        if in_http and d.name == "server" and _server_name(d) in host_servers:
            continue
        if in_http and d.name == "more_clear_headers" and d.args == ["Server"]:
            continue  # what server-tokens "false" adds
        if d.name == "load_module" and d.args == [MODSECURITY_MODULE]:
            continue  # what a profile with ModSecurity adds (services/nginxconf/modsecurity.py)
        if _auth_location(d) is not None or (in_http and _is_auth_cache(d)):
            continue  # checked by _assert_auth_locations
        if _ERROR_LOCATION.fullmatch(" ".join(d.args)) and d.name == "location":
            continue  # one per status of custom-http-errors (ConfigMap or profiles): checked by _assert_error_locations
        lua = None if d.name == "init_by_lua_block" else d.lua
        inner = (_without_values(d.block, settings, in_http=d.name == "http", host_servers=host_servers)
                 if d.block is not None else None)
        kept.append((d.name, tuple(d.args), lua, inner))
    return kept


@functools.lru_cache(maxsize=32)
def _parsed_base(text: str) -> list[Directive]:
    """The tree of a render without values, which most checks of one test share: read once (nobody changes it)."""
    return parse(text)


def assert_values_stay_arguments(config: NginxConfig, text: str) -> None:
    tree = parse(text)
    base = _parsed_base(render(dataclasses.replace(config, profiles=[], globals={}, blocked=BlockLists())))
    settings = http_level_settings(config)
    hosts = frozenset(host for host, _ in config.snippet_servers)
    assert _without_values(tree, set(settings), in_http=False, host_servers=hosts) == \
        _without_values(base, set(settings), in_http=False), "a value changed nginx.conf outside its own directives"
    _assert_host_servers(config, _http(tree), _http(base))

    http_blocks, server_blocks = _block_lists(config.blocked)
    expected = Counter([*http_blocks, *server_blocks])
    for profile in config.profiles:
        expected.update(_rate_limit_zones(profile.rate_limit) if profile.rate_limit else [])
    assert _typed_shapes(tree) == expected, "rate limit or block list directives differ from their values"

    http = _http(tree)
    for name, value in settings.items():
        assert [d.args for d in http.find(name)] == [words(value)], f"http-level {name} {value!r}"

    servers = [d for d in http.block or [] if d.name == "server"]
    locations: dict[str, list[Directive]] = {}
    for d in (d for server in servers for d in server.block or [] if _profile_location(d) is not None):
        locations.setdefault(_profile_location(d), []).append(d)
    [base_default] = [d for server in _http(base).find("server") for d in server.block or []
                      if _profile_location(d) == DEFAULT_PROFILE]
    fixed = Counter((d.name, tuple(d.args)) for d in base_default.block or [])
    profiles = {p.name: p for p in config.profiles}
    assert set(locations) - {DEFAULT_PROFILE} == set(profiles) - {DEFAULT_PROFILE}, "profile locations"
    for name, profile in profiles.items():
        own = Counter((directive, _written_arguments(directive, value)) for directive, value in profile.directives)
        own.update(("deny", (network,)) for network in profile.denied)
        own.update(_rate_limits_in_location(profile.rate_limit) if profile.rate_limit else Counter())
        for location in locations[name]:
            actual = Counter((d.name, tuple(d.args)) for d in location.block or [])
            extra = actual - own - fixed
            if profile.snippet is None:
                assert all(d in _TEMPLATE_NAMES for d, _ in extra), f"profile {name}: directives {sorted(extra)} added"
            assert not own - actual, f"profile {name}: {sorted(own - actual)} not written as their own arguments"
    _assert_auth_locations([http, *servers], profiles)
    _assert_error_locations(servers)


def _server_name(server: Directive) -> str | None:
    names = [d.args for d in server.block or [] if d.name == "server_name"]
    return names[0][0] if names and names[0] else None


def _assert_host_servers(config: NginxConfig, http: Directive, base: Directive) -> None:
    """The server block of a host whose Ingress sets server-snippet, ssl-ciphers or ssl-prefer-server-ciphers
    (config.snippet_servers) is the catch-all server's, with the host's name and its TLS settings each one argument
    (its snippet is checked by the snippet tests)."""
    profiles = {p.name: p for p in config.profiles}
    catch_all = next(d for d in base.find("server") if _server_name(d) == "_")  # the first: the Ingresses' own
    shape = {d.name for d in catch_all.block or [] if _profile_location(d) is None}
    for host, name in config.snippet_servers:
        profile = profiles[name]
        [server] = [d for d in http.find("server") if _server_name(d) == host]
        own = {"ssl_ciphers": profile.ssl_ciphers, "ssl_prefer_server_ciphers": profile.ssl_prefer_server_ciphers}
        for d in server.block or []:
            if d.name in own:
                assert d.args == [own[d.name]], f"server {host}: {d.name} {d.args}"
            elif profile.server_snippet is None and _profile_location(d) is None:
                assert d.name in shape, f"server {host}: {d.name} added"


def _written_arguments(name: str, value: str) -> tuple[str, ...]:
    """The arguments of a profile setting as nginx reads them back (a redirect's variables are written ${name})."""
    [written] = parse(f"{name} {directive_arguments(name, value)};")
    return tuple(written.args)


def _assert_auth_locations(blocks: list[Directive], profiles: dict) -> None:
    """An auth location or upstream (in `blocks`: http and its servers) belongs to a profile with external auth
    and holds only the template's directives."""
    for block in blocks:
        for d in block.block or []:
            if (profile := _auth_location(d)) is None:
                continue
            assert profile in profiles, f"location {d.args} of no profile"
            owner = profiles[profile]
            assert owner.external_auth is not None or owner.mirror is not None, f"location {d.args}"
            names = {inner.name for inner in d.block or []}
            if owner.external_auth is None or owner.external_auth.snippet is None:  # auth-snippet: what nginx -t takes
                assert names <= _TEMPLATE_NAMES, f"auth location of {profile}: {sorted(names - _TEMPLATE_NAMES)} added"


def _assert_error_locations(servers: list[Directive]) -> None:
    """An error location (custom-http-errors) holds only the template's directives."""
    for server in servers:
        for d in server.block or []:
            if d.name == "location" and _ERROR_LOCATION.fullmatch(" ".join(d.args)):
                names = {inner.name for inner in d.block or []}
                assert names <= _TEMPLATE_NAMES, f"error location {d.args}: {sorted(names - _TEMPLATE_NAMES)} added"
