"""The assertion that no value reached nginx.conf as anything but the arguments it was meant to be.

Given an NginxConfig and the text render() made of it, read the text back as nginx does
(nginx_conf_tree.py) and compare it with the configuration rendered without any of its values (no location
profiles, no ConfigMap globals, the same switches):
- outside the profiles' named locations and the http-level settings, the two trees are the same (no value
  added or removed a directive, a block or a Lua block anywhere else);
- each profile's location holds exactly its directives, each with exactly its value's words as arguments,
  beside the directives that the template writes into every profile location;
- each http-level setting is one directive whose arguments are its value's words.
"""
from __future__ import annotations

import dataclasses
import re
from collections import Counter

from services.nginxconf.config import DEFAULT_PROFILE, NginxConfig
from services.nginxconf.render import TEMPLATES_DIR, http_level_settings, render
from tests.support.nginx_conf_tree import Directive, parse, words

PROFILE_PREFIX = "@profile_"
# Directives the template writes in a profile location for its typed fields (CORS's Lua, the https scheme):
# read from the template's own text, so that a new typed field needs no change here.
# `{{ to_backend }}_pass` stands for proxy_pass and grpc_pass.
_TEMPLATE_TEXT = (TEMPLATES_DIR / "nginx.conf.j2").read_text()
_TEMPLATE_NAMES = {word for line in _TEMPLATE_TEXT.splitlines() if line.strip()
                   for word in [line.split()[0]] if word.replace("_", "").isalpha()}
_TEMPLATE_NAMES |= {f"{module}_{rest}" for rest in re.findall(r"\{\{ to_backend \}\}_([a-z_]+)", _TEMPLATE_TEXT)
                    for module in ("proxy", "grpc")}


def _http(tree: list[Directive]) -> Directive:
    [http] = [d for d in tree if d.name == "http"]
    return http


def _profile_location(directive: Directive) -> str | None:
    if directive.name == "location" and directive.args and directive.args[0].startswith(PROFILE_PREFIX):
        return directive.args[0][len(PROFILE_PREFIX):]
    return None


def _without_values(block: list[Directive], settings: set[str], *, in_http: bool) -> list[tuple]:
    """`block` as comparable tuples, less the profile locations and (directly in http) the settings; the Lua
    of init_by_lua_block (it lists the profiles) only by name."""
    kept = []
    for d in block:
        if (_profile_location(d) not in (None, DEFAULT_PROFILE)) or (in_http and d.name in settings):
            continue
        lua = None if d.name == "init_by_lua_block" else d.lua
        inner = _without_values(d.block, settings, in_http=d.name == "http") if d.block is not None else None
        kept.append((d.name, tuple(d.args), lua, inner))
    return kept


def assert_values_stay_arguments(config: NginxConfig, text: str) -> None:
    tree = parse(text)
    base = parse(render(dataclasses.replace(config, profiles=[], globals={})))
    settings = http_level_settings(config)
    assert _without_values(tree, set(settings), in_http=False) == _without_values(base, set(settings),
                                                                                  in_http=False), \
        "a value changed nginx.conf outside its own directives"

    http = _http(tree)
    for name, value in settings.items():
        assert [d.args for d in http.find(name)] == [words(value)], f"http-level {name} {value!r}"

    servers = [d for d in http.block or [] if d.name == "server"]
    locations = {_profile_location(d): d for server in servers for d in server.block or []
                 if _profile_location(d) is not None}
    [base_default] = [d for server in _http(base).find("server") for d in server.block or []
                      if _profile_location(d) == DEFAULT_PROFILE]
    fixed = Counter((d.name, tuple(d.args)) for d in base_default.block or [])
    profiles = {p.name: p for p in config.profiles}
    assert set(locations) - {DEFAULT_PROFILE} == set(profiles) - {DEFAULT_PROFILE}, "profile locations"
    for name, profile in profiles.items():
        actual = Counter((d.name, tuple(d.args)) for d in locations[name].block or [])
        own = Counter((directive, tuple(words(value))) for directive, value in profile.directives)
        extra = actual - own - fixed
        assert all(d in _TEMPLATE_NAMES for d, _ in extra), f"profile {name}: directives {sorted(extra)} added"
        assert not own - actual, f"profile {name}: {sorted(own - actual)} not written as their own arguments"
