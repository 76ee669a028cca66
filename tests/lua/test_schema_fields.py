"""nginx's Lua reads exactly the fields services/nginxconf/table_schema.py declares, and the schema version Python
pushes. The Lua entry builders (router, canary, affinity, client_auth, balancer, certificates, store) run inside a
real nginx on entries with every declared field set, each object a proxy that notes the fields asked for
(tests/lua/fields_read.lua): a field the schema lacks, or one the Lua no longer reads, fails here."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.nginxconf import table_schema as schema
from tests.lua.nginx_lua import LUA_TESTS, run_lua


def sample(type_: schema.Type) -> Any:
    """A value of `type_` with every field of every record set, records marked for fields_read.lua."""
    if isinstance(type_, schema.Scalar):
        return type_.example
    if isinstance(type_, schema.OneOf):
        return type_.values[0]
    if isinstance(type_, schema.Nullable):
        return sample(type_.inner)
    if isinstance(type_, schema.ListOf):
        return [sample(type_.item)]
    if isinstance(type_, schema.MapOf):
        return {type_.key.example: sample(type_.value)}
    if isinstance(type_, schema.PairOf):
        return [type_.first.example, sample(type_.second)]
    return {"__record": type_.name, **{f.name: sample(f.type) for f in type_.fields}}


def body(record: schema.Record, **values: Any) -> str:
    return json.dumps({"__record": record.name, **values})


def test_the_lua_reads_exactly_the_schemas_fields(tmp_path: Path):
    entries = {name: {"key": "a.example", "entry": sample(table.entry)} for name, table in schema.TABLES.items()}
    bodies = {"routes": [
        body(schema.WHOLE_BODY, version="v1", schema=schema.SCHEMA_VERSION, data={}),
        body(schema.DELTA_BODY, base="v1", version="v2", schema=schema.SCHEMA_VERSION, set={}, delete=[]),
    ]}
    (tmp_path / "input.json").write_text(json.dumps({"entries": entries, "bodies": bodies}))
    result = run_lua(tmp_path, f'INPUT_PATH = "{tmp_path}/input.json"\ndofile("{LUA_TESTS}/fields_read.lua")')
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    assert not found["errors"], found["errors"]  # cjson writes an empty list as {}
    assert found["schema_version"] == schema.SCHEMA_VERSION
    records = [r for t in schema.TABLES.values() for r in schema.records(t.entry)] + [schema.WHOLE_BODY,
                                                                                      schema.DELTA_BODY]
    declared = {r.name: sorted(f.name for f in r.fields if f.lua_reads) for r in records}
    problems = []
    for name in sorted(set(declared) | set(found["reads"])):
        read, want = set(found["reads"].get(name, [])), set(declared.get(name, []))
        if read - want:
            problems.append(f"{name}: the Lua reads {sorted(read - want)}, which table_schema.py does not declare")
        if want - read:
            problems.append(f"{name}: table_schema.py declares {sorted(want - read)}, which the Lua does not read")
    assert not problems, "\n".join(problems)
