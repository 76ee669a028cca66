"""use-regex, rewrite-target and app-root as a client and the backend see them through a real nginx, from the
routes table alone (matching and rewriting happen in router.lua; no reload)."""
from __future__ import annotations

import pytest

from services.syncer.model.types import HostRoutes, Route

from .conftest import route


@pytest.fixture(scope="module")
def routed(shared_nginx, echo):
    shared_nginx.apply(shared_nginx.config())
    api, web, other = echo("api"), echo("web"), echo("other")
    rewritten = Route(backend="api", ingress="default/api", rewrite="/$2")
    shared_nginx.push({
        "regex.test": HostRoutes(regex=True, prefix={
            "/api(/|$)(.*)": rewritten,
            "/": route("web"),
            "/static/[a-z]+\\.css": route("other"),
        }, exact={"/exact": route("other")}),
        "plain.test": HostRoutes(prefix={"/api": route("api")}),
        "root.test": HostRoutes(prefix={"/": route("web")}, app_root="/app"),
    }, {"api": [api.endpoint], "web": [web.endpoint], "other": [other.endpoint]})
    return shared_nginx


@pytest.mark.parametrize("path, backend, received", [
    ("/api/users/7?x=1", "api", "/users/7?x=1"),   # rewrite-target /$2, the query string kept
    ("/api", "api", "/"),                          # $2 empty: "/"
    ("/API/Users", "api", "/Users"),               # case-insensitive match, the capture as sent
    ("/apix", "web", "/apix"),                     # "(/|$)" does not match "x": the next pattern, "/"
    ("/static/site.css", "other", "/static/site.css"),
    ("/exact", "other", "/exact"),                 # Exact paths stay exact
])
def test_regex_paths_match_and_rewrite(routed, path, backend, received):
    response = routed.get(path, host="regex.test")
    assert response.status == 200
    assert (response.backend, response.json["path"]) == (backend, received)


def test_a_host_without_regex_matches_prefixes_by_path_element(routed):
    assert routed.get("/api/x", host="plain.test").backend == "api"
    assert routed.get("/apix", host="plain.test").status == 404


def test_app_root_redirects_only_slash(routed):
    response = routed.get("/", host="root.test")
    assert response.status == 302
    assert response.headers["location"] == "http://root.test/app"  # the Host header as the client sent it
    assert routed.get("/other", host="root.test").backend == "web"
