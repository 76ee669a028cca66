"""One tenant's table entry that nginx's Lua cannot build (a regex PCRE refuses, a malformed endpoint, a certificate
OpenSSL cannot use) is refused alone: every other entry of the push is served, the refused key keeps what nginx
served before for it (or stays absent), and nginx's answer names it, whole push or delta."""
from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.common.canonical import canonical_json
from services.common.settings import Settings
from services.nginxconf.prefix import FAKE_CERTIFICATE_CN
from services.nginxconf.tables import TablePusher
from services.syncer.model.types import HostRoutes, Model, Route
from services.syncer.nginx_apply.applier import NginxApplier
from services.syncer.observability.metrics import SyncerMetrics
from services.nginxconf.table_schema import SCHEMA_VERSION

from .conftest import route, trust

FAKE = FAKE_CERTIFICATE_CN
PCRE_REFUSES = "/[:alpha:]"  # Python's re takes it; PCRE: "POSIX named classes are supported only within a class"


@pytest.fixture(scope="module")
def nginx(shared_nginx):
    trust(shared_nginx.paths.default_certificate)
    return shared_nginx


@pytest.fixture(scope="module")
def app(echo):
    return echo("app")


@pytest.fixture(scope="module")
def old(echo):
    return echo("old")


def to(backend: str) -> dict[str, Any]:
    return HostRoutes(prefix={"/": route(backend)}).to_json()


def regex_host(path: str, backend: str = "app") -> dict[str, Any]:
    return HostRoutes(regex=True, prefix={path: route(backend)}).to_json()


def answer(nginx, host: str) -> str | int:
    """The backend that answered a request for `host`, else the status."""
    response = nginx.get("/", host=host)
    return response.backend or response.status


def push(nginx, pusher: TablePusher, routes: dict[str, Any], backends: dict[str, list[str]],
         certificates: dict[str, Any] | None = None) -> list[str]:
    return nginx.run(pusher.push(routes=routes, backends=backends, certificates=certificates or {}))


@pytest.mark.parametrize("mode", ["whole", "delta"])
def test_a_regex_pcre_refuses_refuses_only_its_host(nginx, app, old, mode):
    backends = {"app": [app.endpoint], "old": [old.endpoint]}
    pusher = TablePusher(nginx.paths)
    push(nginx, pusher, {"good.entries.test": to("app"), "kept.entries.test": to("old")}, backends)

    later = {"good.entries.test": to("app"), "new.entries.test": to("app"),
             "kept.entries.test": regex_host(PCRE_REFUSES), "never.entries.test": regex_host("/(unclosed")}
    pusher_after = pusher if mode == "delta" else TablePusher(nginx.paths)
    assert push(nginx, pusher_after, later, backends) == ["routes"]

    whole_version = hashlib.sha256(canonical_json(later)).hexdigest()
    assert (nginx.run(pusher_after.versions())["routes"] == whole_version) == (mode == "whole")
    refused = pusher_after.refused["routes"]
    assert set(refused) == {"kept.entries.test", "never.entries.test"}
    assert "POSIX named classes are supported only within a class" in refused["kept.entries.test"]
    assert "missing )" in refused["never.entries.test"]
    served = {host: answer(nginx, host) for host in later}
    assert served == {"good.entries.test": "app", "new.entries.test": "app",
                      "kept.entries.test": "old",  # its last good routes
                      "never.entries.test": 404}
    # Fixed, the host takes its new routes and is no longer refused.
    later = {**later, "kept.entries.test": regex_host("/[[:alpha:]]*")}  # a new dict: the pusher keeps the last
    push(nginx, pusher_after, later, backends)
    assert answer(nginx, "kept.entries.test") == "app"
    assert set(pusher_after.refused["routes"]) == {"never.entries.test"}
    assert json.loads(nginx.api("GET", "/configuration/refused").body)["routes"] == pusher_after.refused["routes"]


def test_the_answer_names_each_refused_entry_and_why(nginx, app):
    push(nginx, TablePusher(nginx.paths), {}, {"app": [app.endpoint]})
    body = json.dumps({"version": "answer-test", "schema": SCHEMA_VERSION, "data": {
        "good.entries.test": to("app"),
        "canary.entries.test": {"prefix": [["/", {"backend": "app", "canary": {"backend": "app",
                                                                               "header_pattern": "a{2,1}"}}]]},
        "cn.entries.test": {"prefix": [["/", {"backend": "app", "ingress": "t/cn"}]], "client_auth": {
            "t/cn": {"ca": "-", "verify": "on", "depth": 1, "match_cn": "CN=(("}}},
        "UPPER.entries.test": to("app")}}).encode()
    response = nginx.api("POST", "/configuration/routes", body)

    assert response.status == 201
    refused = response.json["refused"]
    assert set(refused) == {"canary.entries.test", "cn.entries.test", "UPPER.entries.test"}
    assert "canary header_pattern is not a regular expression nginx can use" in refused["canary.entries.test"]
    assert "client_auth match_cn of t/cn is not a regular expression nginx can use" in refused["cn.entries.test"]
    assert "must be lower case" in refused["UPPER.entries.test"]
    assert answer(nginx, "good.entries.test") == "app"


def test_a_table_sent_as_a_list_is_refused_whole_and_empties_nothing(nginx, app):
    push(nginx, TablePusher(nginx.paths), {"kept.entries.test": to("app")}, {"app": [app.endpoint]})
    body = json.dumps({"version": "a-list", "schema": SCHEMA_VERSION, "data": [to("app")]}).encode()
    response = nginx.api("POST", "/configuration/routes", body)

    assert response.status == 400
    assert response.json["error"] == 'the body needs a "data" object'
    assert answer(nginx, "kept.entries.test") == "app"


@pytest.mark.parametrize("mode", ["whole", "delta"])
def test_a_malformed_backend_keeps_its_last_endpoints(nginx, app, old, mode):
    routes = {f"{name}.backends.test": to(name) for name in ("good", "kept", "never")}
    pusher = TablePusher(nginx.paths)
    push(nginx, pusher, routes, {"good": [app.endpoint], "kept": [old.endpoint]})

    later = {"good": [app.endpoint], "kept": ["10.0.0.1:99999"], "never": [app.endpoint, "not-an-address"]}
    push(nginx, pusher if mode == "delta" else TablePusher(nginx.paths), routes, later)

    refused = json.loads(nginx.api("GET", "/configuration/refused").body)["backends"]
    assert set(refused) == {"kept", "never"} and "not-an-address" in refused["never"]
    assert {host: answer(nginx, host) for host in routes} == {
        "good.backends.test": "app", "kept.backends.test": "old", "never.backends.test": 503}


def test_a_certificate_openssl_cannot_use_is_refused_alone(nginx, app, make_certificate):
    first, rotated = make_certificate("ok.certs.test"), make_certificate("ok2.certs.test")
    kept, other = make_certificate("kept.certs.test"), make_certificate("other.certs.test")
    routes, backends = {"_": to("app")}, {"app": [app.endpoint]}
    hosts = {"ok.certs.test": "t/ok", "kept.certs.test": "t/kept", "garbage.certs.test": "t/garbage"}
    pusher = TablePusher(nginx.paths)
    push(nginx, pusher, routes, backends, {"certs": {"t/ok": first, "t/kept": kept},
                                           "hosts": {"ok.certs.test": "t/ok", "kept.certs.test": "t/kept"}})

    push(nginx, pusher, routes, backends, {
        "certs": {"t/ok": rotated, "t/kept": {"cert": kept["cert"], "key": other["key"]},
                  "t/garbage": {"cert": "not a PEM", "key": other["key"]}},
        "hosts": hosts, "default": None})

    refused = pusher.refused["certificates"]
    assert set(refused) == {"certs/t/kept", "certs/t/garbage", "hosts/garbage.certs.test"}
    assert "the private key is not the certificate's" in refused["certs/t/kept"]
    assert "the certificate does not parse" in refused["certs/t/garbage"]
    served = {sni: nginx.get("/", https=True, sni=sni).peer_subject for sni in hosts}
    assert served == {"ok.certs.test": "ok2.certs.test", "kept.certs.test": "kept.certs.test",
                      "garbage.certs.test": FAKE}
    assert nginx.get("/", https=True, sni="kept.certs.test").backend == "app"


# --- property: a bad entry never refuses the others -------------------------------------------------------------

BAD_ROUTES = {
    "pcre class": lambda: regex_host(PCRE_REFUSES),
    "pcre nosuch": lambda: regex_host("/[[:nosuch:]]"),
    "pcre paren": lambda: regex_host("/a)"),
    "pcre quantifier": lambda: regex_host("/x{3,1}"),
    "path without slash": lambda: {"prefix": [["nope", {"backend": "app"}]]},
    "route not an object": lambda: {"exact": {"/": "app"}},
    "prefix not a list": lambda: {"prefix": 7},
    "backend not a string": lambda: {"prefix": [["/", {"backend": 5}]]},
    "canary pattern": lambda: {"prefix": [["/", {"backend": "app", "canary": {"header_pattern": "(?<"}}]]},
    "canary weight": lambda: {"prefix": [["/", {"backend": "app", "canary": {"weight_total": 0}}]]},
    "match_cn": lambda: {"prefix": [["/", {"backend": "app", "ingress": "t/x"}]], "client_auth": {
        "t/x": {"ca": "-", "verify": "on", "depth": 1, "match_cn": "["}}},
    "not an object": lambda: "routes",
}
BAD_BACKENDS = {
    "no port": ["127.0.0.1"],
    "port out of range": ["127.0.0.1:70000"],
    "a name": ["app.svc:80"],
    "not a list": "127.0.0.1:80",
    "a number": [8080],
}

host_case = st.fixed_dictionaries({
    "before": st.booleans(),  # the host and its backend were served before this push
    "host": st.none() | st.sampled_from(sorted(BAD_ROUTES)),  # None: a good entry
    "backend": st.none() | st.sampled_from(sorted(BAD_BACKENDS)),
})


@settings(deadline=None, derandomize=True, database=None, max_examples=60)
@given(cases=st.lists(host_case, min_size=1, max_size=6), mode=st.sampled_from(["whole", "delta"]))
def test_every_well_formed_entry_is_served_whatever_the_others_hold(nginx, app, old, cases, mode):
    hosts = [f"h{i}.property.test" for i in range(len(cases))]
    before_routes = {host: to(f"b{i}") for i, (host, case) in enumerate(zip(hosts, cases)) if case["before"]}
    before_backends = {f"b{i}": [old.endpoint] for i, case in enumerate(cases) if case["before"]}
    pusher = TablePusher(nginx.paths)
    push(nginx, pusher, before_routes, before_backends)

    routes = {host: BAD_ROUTES[case["host"]]() if case["host"] else to(f"b{i}")
              for i, (host, case) in enumerate(zip(hosts, cases))}
    backends = {f"b{i}": BAD_BACKENDS[case["backend"]] if case["backend"] else [app.endpoint]
                for i, case in enumerate(cases)}
    push(nginx, pusher if mode == "delta" else TablePusher(nginx.paths), routes, backends)

    refused = json.loads(nginx.api("GET", "/configuration/refused").body)
    assert set(refused["routes"]) == {host for host, case in zip(hosts, cases) if case["host"]}
    assert set(refused["backends"]) == {f"b{i}" for i, case in enumerate(cases) if case["backend"]}
    for host, case in zip(hosts, cases):
        if case["host"] and not case["before"]:
            want: str | int = 404  # never good: absent
        elif case["backend"]:
            want = "old" if case["before"] else 503  # the backend's last good endpoints, or none
        else:
            want = "app"
        assert answer(nginx, host) == want, (host, case)


def test_the_syncer_reports_each_refused_entry_as_a_problem_of_its_ingress(nginx_factory, app, caplog):
    nginx = nginx_factory()
    settings = Settings.from_flags(state_dir=str(nginx.state_dir), run_dir=str(nginx.run_dir))
    applier = NginxApplier(settings, SyncerMetrics(settings))
    model = Model(config=nginx.config(), backends={"app": [app.endpoint]}, routes={
        "good.syncer.test": HostRoutes(prefix={"/": Route("app", ingress="a/good")}),
        # As if the syncer's own PCRE check had let it through: the second line is nginx's Lua.
        "bad.syncer.test": HostRoutes(regex=True, prefix={PCRE_REFUSES: Route("app", ingress="b/bad")})})

    assert nginx.run(applier.apply(model)) == {}

    assert answer(nginx, "good.syncer.test") == "app" and answer(nginx, "bad.syncer.test") == 404
    assert [str(p) for p in model.problems] == [
        "Ingress b/bad: nginx refused the routes of host bad.syncer.test (bad.syncer.test: path /[:alpha:] is not a "
        "regular expression nginx can use: pcre_compile() failed: POSIX named classes are supported only within a "
        'class in "^/[:alpha:]" at "[:alpha:]"); nginx keeps what it served before for it, if anything']
    assert applier.health()["refused_entries"] == {"routes": ["bad.syncer.test"]}
    assert "nginx refused a table entry; the others are applied" in caplog.text


def test_the_same_table_pushed_over_other_contents_is_served_as_nginx_holds_it(nginx, old):
    # One version, two contents: the refused entry is absent after the first push and keeps the routes of the push
    # between them after the second. Workers that served the first and nothing since must not keep it.
    backends = {"old": [old.endpoint]}
    refused_host = {"h.same.test": regex_host(PCRE_REFUSES, "old")}
    push(nginx, TablePusher(nginx.paths), refused_host, backends)
    assert {answer(nginx, "h.same.test") for _ in range(8)} == {404}
    push(nginx, TablePusher(nginx.paths), {"h.same.test": to("old")}, backends)

    push(nginx, TablePusher(nginx.paths), refused_host, backends)

    assert {answer(nginx, "h.same.test") for _ in range(8)} == {"old"}


def test_a_refusal_quoting_a_non_ascii_pattern_is_reported(nginx, app):
    # PCRE quotes the pattern from a byte offset on, which may start inside a UTF-8 character: read with care.
    pusher = TablePusher(nginx.paths)
    push(nginx, pusher, {"good.utf8.test": to("app"), "bad.utf8.test": regex_host("/é[:alpha:]")},
         {"app": [app.endpoint]})

    assert "POSIX named classes" in pusher.refused["routes"]["bad.utf8.test"]
    assert answer(nginx, "good.utf8.test") == "app"
