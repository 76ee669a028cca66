"""Deny lists through real nginx, by client address (127.0.0.x, or what use-forwarded-headers trusts):
denylist-source-range in a profile, and the ConfigMap's block lists before any routing."""
from __future__ import annotations

import pytest

from services.nginxconf.config import BlockLists, LocationProfile
from services.syncer.model.types import HostRoutes

from .conftest import route

HOST = "deny.example"
DENYING = LocationProfile.of((("allow", "127.0.0.0/8"), ("deny", "all")), denied=("127.0.0.8/30",))


@pytest.fixture
def nginx(nginx_factory, echo):
    instance = nginx_factory()
    instance.backend = echo("app")
    return instance


def serve(nginx, **config) -> None:
    assert nginx.apply(nginx.config([DENYING], **config))
    nginx.push({HOST: HostRoutes(prefix={"/": route("app", DENYING.name)}), "open.example": HostRoutes(
        prefix={"/": route("app")})}, {"app": [nginx.backend.endpoint]})


def test_denied_networks_win_over_the_allowlist(nginx):
    serve(nginx)
    statuses = {source: nginx.get("/", host=HOST, source=source).status
                for source in ("127.0.0.7", "127.0.0.8", "127.0.0.11", "127.0.0.12")}
    assert statuses == {"127.0.0.7": 200, "127.0.0.8": 403, "127.0.0.11": 403, "127.0.0.12": 200}
    assert nginx.get("/", host="open.example", source="127.0.0.8").status == 200


def test_with_use_forwarded_headers_the_forwarded_address_is_the_one_denied(nginx):
    serve(nginx, use_forwarded_headers=True)
    assert nginx.get("/", host=HOST, headers={"X-Forwarded-For": "127.0.0.9"}).status == 403
    assert nginx.get("/", host=HOST, source="127.0.0.9", headers={"X-Forwarded-For": "127.0.0.20"}).status == 200


def test_block_lists_answer_403_on_every_host_before_routing(nginx):
    serve(nginx, blocked=BlockLists(networks=("127.0.0.66/32",), user_agents=("default", "~*bot\\z", "curl/8.0"),
                                    referers=("~^https?://spam\\.example/",)))
    get = nginx.get
    assert get("/", host="open.example", source="127.0.0.66").status == 403
    assert get("/", host="nowhere.example", source="127.0.0.66").status == 403  # 404 otherwise
    assert get("/", host="open.example", source="127.0.0.67").status == 200
    # Exact values are whole values, compared without case as nginx's map does; "default" is one too.
    agents = {ua: get("/", host="open.example", headers={"User-Agent": ua}).status
              for ua in ("default", "CURL/8.0", "curl/8.0.1", "Some BOT", "a bot x")}
    assert agents == {"default": 403, "CURL/8.0": 403, "curl/8.0.1": 200, "Some BOT": 403, "a bot x": 200}
    assert get("/", host="open.example", headers={"Referer": "http://spam.example/x"}).status == 403
    assert get("/", host="open.example", headers={"Referer": "http://ham.example/"}).status == 200
