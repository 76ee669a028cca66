"""Property test: the controller accepts exactly the use-regex paths nginx's Lua compiles.

Hypothesis generates regex-ish paths (metacharacters, POSIX class syntax, escapes, quantifiers, group syntax).
For each, the model decides (an Ingress with use-regex and that path, beside nothing else), and a real nginx is
pushed a host routing that path and "/" to one backend: the host is served exactly when the model accepted the
path. A path the model accepts but ngx.re refuses would be a tenant able to freeze or drop routes; one the model
refuses but nginx takes would be a tenant refused for nothing. Each example uses a host of its own, so that the
last good value nginx keeps of an earlier one never answers for it. Derandomized and database-less, as
test_fuzz_isolation.py, so that CI sees the same examples every time.
"""
from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.syncer.model.types import HostRoutes
from services.nginxconf.table_schema import SCHEMA_VERSION
from tests.support.model_cluster import Cluster

from .conftest import route

PIECES = (
    "a", "Z", "0", "-", "_", ".", "/", "é", "%", "~",
    "(", ")", "[", "]", "{", "}", "|", "*", "+", "?", "^", "$", "\\",
    "[:alpha:]", "[[:alpha:]]", "[[:nosuch:]]", "[:", ":]", "[^", "[a-", "[]a]",
    "\\d", "\\w", "\\s", "\\b", "\\z", "\\Z", "\\x41", "\\x{41}", "\\0", "\\1", "\\u0041", "\\U", "\\N", "\\y",
    "\\p{L}", "\\P{Nd}", "\\k<n>", "\\g1", "\\Q", "\\E", "\\C", "\\K", "\\R", "\\X", "\\c",
    "(?:", "(?i)", "(?-i)", "(?a)", "(?<=", "(?<!", "(?=", "(?!", "(?<n>", "(?P<n>", "(?P=n)", "(?#", "(?|",
    "(?>", "(?R)", "(?1)", "(*ACCEPT)", "(*UTF8)", "(*FAIL)",
    "{2}", "{2,}", "{2,1}", "{,3}", "{99999}", "*?", "++", "?+", "{1,2}?",
)
regex_paths = st.lists(st.sampled_from(PIECES), min_size=1, max_size=8).map(lambda pieces: "/" + "".join(pieces))

FUZZ = settings(deadline=None, derandomize=True, database=None, max_examples=300)


def controller_accepts(path: str) -> bool:
    cluster = Cluster()
    cluster.ingress_class()
    cluster.service("web")
    cluster.ingress("fuzzed", host="fuzzed.test", paths=[(path, "ImplementationSpecific", "web", 80)],
                    annotations={"use-regex": "true"})
    return not cluster.rejections(cluster.build())


@pytest.fixture(scope="module")
def regex_host(shared_nginx, echo):
    """serves(path): whether nginx serves a new host whose regex routes are `path` and "/" (both to backend
    "web") once its routes table is posted to nginx's configuration API as the syncer posts one."""
    shared_nginx.apply(shared_nginx.config())
    shared_nginx.push({}, {"web": [echo("web").endpoint]})
    hosts = (f"regex-{n}.test" for n in itertools.count())

    def serves(path: str) -> bool:
        host = next(hosts)
        routes = {host: HostRoutes(regex=True, prefix={path: route("web"), "/": route("web")}).to_json()}
        # Posted here rather than through TablePusher, which reads nginx's answer as text: a refusal quotes the
        # pattern from PCRE's byte offset on, which may start inside a UTF-8 character.
        answer = shared_nginx.api("POST", "/configuration/routes",
                                  json.dumps({"version": host, "schema": SCHEMA_VERSION, "data": routes}).encode())
        assert answer.status in (201, 400), answer
        if answer.status == 400:
            return False
        response = shared_nginx.get("/", host=host)
        assert response.status in (200, 404), response
        return response.status == 200

    assert serves("/api(/|$)(.*)") and not serves("/[:alpha:]")  # the check itself tells both apart
    return serves


@FUZZ
@given(path=regex_paths)
def test_nginx_serves_exactly_the_regex_paths_the_controller_accepts(regex_host, path):
    assert regex_host(path) == controller_accepts(path)
