"""Every pushed body names its table schema (table_schema.SCHEMA_VERSION); nginx's Lua refuses a body of another
schema whole and says which it reads, and what it served stays."""
from __future__ import annotations

import json

import pytest

from services.nginxconf import tables
from services.nginxconf.table_schema import SCHEMA_VERSION
from services.nginxconf.tables import NginxPushError
from services.syncer.model.types import HostRoutes

from .conftest import route


@pytest.fixture(scope="module")
def nginx(shared_nginx, echo):
    app = echo("app")
    shared_nginx.push({"schema.test": HostRoutes(prefix={"/": route("app")})}, {"app": [app.endpoint]})
    return shared_nginx


def served_by(nginx) -> str | None:
    response = nginx.get("/", host="schema.test")
    return response.json["backend"] if response.status == 200 else None


def test_the_state_file_names_the_schema(nginx):
    assert json.loads(nginx.paths.table_file("routes").read_bytes())["schema"] == SCHEMA_VERSION


@pytest.mark.parametrize("path, body", [
    ("/configuration/routes", {"version": "next", "data": {"schema.test": {}}}),
    ("/configuration/routes/delta", {"base": "any", "version": "next", "set": {}, "delete": ["schema.test"]}),
])
def test_a_body_of_another_schema_is_refused_whole(nginx, path, body):
    answer = nginx.api("POST", path, json.dumps({**body, "schema": SCHEMA_VERSION + 1}).encode())
    assert answer.status == 400
    assert json.loads(answer.body)["error"] == (
        f"the body has table schema {SCHEMA_VERSION + 1}, this nginx's Lua reads schema {SCHEMA_VERSION}; "
        "run the syncer and nginx's Lua (--template) of the same pyngress release")
    assert served_by(nginx) == "app"


def test_the_pusher_reports_nginx_refusing_its_schema(nginx, monkeypatch, echo):
    monkeypatch.setattr(tables, "_SCHEMA", b'"schema":' + str(SCHEMA_VERSION + 1).encode())
    pusher = tables.TablePusher(nginx.paths)
    other = echo("other")
    with pytest.raises(NginxPushError, match=f"nginx refused backends: the body has table schema {SCHEMA_VERSION + 1}"):
        nginx.run(pusher.push(routes={}, backends={"app": [other.endpoint]}, certificates={}))
    assert served_by(nginx) == "app"
