"""The pushed tables' schema (services/nginxconf/table_schema.py): what serialise writes and refuses, and that the
model's entries fit it. (That the Lua reads exactly its fields: tests/lua/test_schema_fields.py.)"""
from __future__ import annotations

import pytest

from services.nginxconf import table_schema as schema
from services.nginxconf.table_schema import SchemaError
from services.syncer.annotations.base import AffinityPolicy, CanaryPolicy
from services.syncer.model.types import CanaryRoute, ClientAuth, HostRoutes, Route


def test_serialise_leaves_out_what_the_field_omits():
    route = schema.ROUTE.serialise(backend="web-80", profile="default", ingress="team/web", service="",
                                   rewrite=None, ewma=False, hash_subset_size=0, port_in_redirects=True)
    assert route == {"backend": "web-80", "profile": "default", "ingress": "team/web", "port_in_redirects": True}


def test_serialise_keeps_a_zero_that_is_not_an_omitted_false():
    canary = schema.CANARY.serialise(backend=None, ingress="t/c", header=None, header_value=None,
                                     header_pattern=None, cookie=None, weight=0, weight_total=100)
    assert canary["weight"] == 0 and "sticky" not in canary


@pytest.mark.parametrize("values, message", [
    ({"backend": "b", "profile": "p", "ingress": "i", "colour": "red"},
     "route: field 'colour' is not in the schema; declare it in services/nginxconf/table_schema.py and read it "
     "in router.lua (route_of)"),
    ({"backend": "b", "profile": "p"}, "route: field 'ingress' is required"),
])
def test_serialise_refuses_what_the_lua_would_not_read(values, message):
    with pytest.raises(SchemaError) as refused:
        schema.ROUTE.serialise(**values)
    assert str(refused.value) == message


@pytest.mark.parametrize("values, message", [
    ({"backend": 80, "profile": "p", "ingress": "i"}, "route.backend: expected string, got 80"),
    ({"backend": "b", "profile": "p", "ingress": "i", "hash_subset_size": True},
     "route.hash_subset_size: expected integer, got True"),
])
def test_check_record_refuses_a_value_of_another_type(values, message):
    with pytest.raises(SchemaError) as refused:
        schema.check_record(schema.ROUTE, schema.ROUTE.serialise(**values))
    assert str(refused.value) == message


def test_a_tuple_becomes_a_list_and_a_path_must_start_with_a_slash():
    route = schema.ROUTE.serialise(backend="b", profile="default", ingress="t/i")
    host = schema.HOST_ROUTES.serialise(exact={}, prefix=[["/", route]], default=None, tls=True, ssl_redirect=True,
                                        force_ssl_redirect=False, hsts=None, redirect_code=308,
                                        no_tls_redirect=("/.well-known/acme-challenge",))
    assert host["prefix"] == [["/", route]] and host["no_tls_redirect"] == ["/.well-known/acme-challenge"]
    with pytest.raises(SchemaError, match=r"host_routes.exact key: a path must start with /, not 'api'"):
        schema.check_record(schema.HOST_ROUTES, schema.HOST_ROUTES.serialise(
            exact={"api": route}, prefix=[], default=None, tls=False, ssl_redirect=True, force_ssl_redirect=False,
            hsts=None))


def test_an_empty_map_a_field_omits_is_left_out():
    host = schema.HOST_ROUTES.serialise(exact={}, prefix=[], default=None, tls=False, ssl_redirect=True,
                                        force_ssl_redirect=False, hsts=None, client_auth={})
    assert "client_auth" not in host


def test_check_table_names_the_key_and_nested_field():
    with pytest.raises(SchemaError, match=r"routes\['a.example'\].default.canary.weight: expected integer"):
        schema.check_table("routes", {"a.example": {
            "exact": {}, "prefix": [], "tls": False, "ssl_redirect": True, "force_ssl_redirect": False, "hsts": None,
            "default": {"backend": "b", "profile": "default", "ingress": "t/i",
                        "canary": {"backend": "c", "ingress": "t/c", "header": None, "header_value": None,
                                   "header_pattern": None, "cookie": None, "weight": "10", "weight_total": 100}}}})
    with pytest.raises(SchemaError, match=r"backends\['web'\]\[0\]: expected endpoint"):
        schema.check_table("backends", {"web": [8080]})


def _every_route_kind() -> HostRoutes:
    canary = CanaryRoute(backend="team-canary-80", ingress="team/canary", sticky=True,
                         policy=CanaryPolicy(header="X-Canary", header_pattern="^a", cookie="c", weight=10))
    affinity = AffinityPolicy(cookie="route", max_age=60, samesite="None", conditional_samesite_none=True,
                              domain="a.example", change_on_failure=True, mode="persistent")
    full = Route("team-web-80", profile="p1", ingress="team/web", service="web", rewrite="/$1", canary=canary,
                 affinity=affinity, hash_by="$request_uri", default_backend="team-fallback-80", ewma=True,
                 hash_subset_size=3, preserve_trailing_slash=True, port_in_redirects=True, rewrite_log=True)
    auth = ClientAuth(ca="PEM", crl=None, verify="optional", depth=2, error_page=None, pass_certificate=True,
                      match_cn="CN=a")
    return HostRoutes(exact={"/x": Route(None)}, prefix={"/": full, "/api": Route("team-api-80")}, default=full,
                      tls=True, hsts="max-age=1", client_auth={"team/web": auth}, regex=True, app_root="/app",
                      redirect_host="www.a.example")


@pytest.mark.parametrize("host_routes", [HostRoutes(), HostRoutes(prefix={"/": Route("b")}), _every_route_kind()],
                         ids=["empty", "plain", "every-field"])
def test_the_models_entries_fit_the_schema(host_routes):
    entry = host_routes.to_json()
    assert schema.check_table("routes", {"a.example": entry}) == {"a.example": entry}


def test_every_record_is_reachable_from_a_table():
    reachable = {r.name for t in schema.TABLES.values() for r in schema.records(t.entry)}
    assert reachable == {"host_routes", "route", "canary", "affinity", "client_auth", "certificates", "certificate",
                         "gateway_routes", "gateway_layer", "gateway_match", "gateway_value_match", "gateway_action",
                         "gateway_backend", "gateway_backend_filters", "gateway_redirect", "gateway_header_changes",
                         "gateway_mirror", "gateway_cors", "gateway_cors_origin", "gateway_budget"}
