--[[
The tables the syncer pushes (routes, backends, certificates), kept in shared dictionaries so that every
worker sees them, survive a HUP reload, and change without one.

A whole table arrives as the body of `POST /configuration/<table>` and is also kept by the syncer in
`<state-dir>/dynamic/<table>.json` (read here when a freshly started master has empty dictionaries, followed by the
deltas journaled since in `<table>.deltas`, services/nginxconf/table_state_files.py):

    {"version": "<content hash>", "schema": <SCHEMA_VERSION>, "data": <the table>}

"schema" is the version of the tables' format (services/nginxconf/table_schema.py declares every field): a body of
another schema is refused whole, so that a Lua of another release (a custom --template) never reads entries it does
not understand. A body without it is schema 1, the format before it was versioned.

A keyed table (routes: host -> its routes; backends: name -> endpoints) also takes a change to the version
nginx holds, as the body of `POST /configuration/<table>/delta`:

    {"base": "<the version it applies to>", "version": "<the new one>", "schema": <SCHEMA_VERSION>,
     "set": {key: entry}, "delete": [key]}

refused with 409 when nginx holds another version than `base` (the syncer then sends the whole table). So a
change to one host of 10,000 moves one entry, not the table: each entry is its own dictionary item
("k:<key>", its JSON) and each delta's keys are logged ("log:<n>", the last LOG_KEPT of them).

One tenant's entry never refuses the others': a push applies every entry that builds, and an entry that does not
(a regex PCRE refuses, a malformed endpoint, a certificate that does not parse) leaves the key as it was, so the
last good value keeps serving (a key never good stays absent). The push still takes its version, so that the
syncer's next delta applies; the refused keys and why are kept ("refused", until a later push sets or deletes
them) and answered (`refused`: key -> message).

A worker decodes a keyed table's entries one at a time, when a request first asks for one (`current` returns a
view that fetches a missing key from the dictionary): a whole table of 10,000 hosts costs a worker nothing until
it is used, and then one entry per host asked, not 10,000 before its first answer. A delta makes each worker
drop the entries it logged; a whole table, or a worker further behind than the log, starts an empty view.

`pyngress_versions` holds the version of each table, the number of pushes it took, and a generation number
that every push increments; the table itself lives in `pyngress_<table>`. A worker keeps a table until its push
count changes, not its version: with refused entries kept at their last good value, one version can name
different contents (the same table pushed over different ones). A request reads the generation once (`refresh`, in the router)
and then takes its tables from the worker's cache (`current`, also in the balancer of the same request):
outside the JIT, every shared-dictionary read costs about half a microsecond, which each request would
otherwise pay per table it uses.

A table module registers with `define(name, spec)`:
  spec.entry(key, data) -> value  a keyed table: checks one entry (error(message) when it is malformed) and
                                  returns what the workers use.
  spec.build(data, dict) -> value, refused   a whole table (certificates): the table from `data`, with the last
                                  good value (from `dict`, nil: none) in place of each entry it refuses
                                  (refused: key -> message, or nil); error(message) refuses the push whole.
  spec.put(dict, text, data, value, refused) -> ok, err   whole tables: how to keep it in the dictionary.
  spec.load(dict) -> value        whole tables: what `get` returns, from the dictionary.
  spec.change(dict, set, delete, refused) -> ok, err   a whole table that takes deltas too (certificates): applies
                                  the delta's `set` and `delete` to what the dictionary holds and brings `refused` (the
                                  table's, key -> message) up to date; nil, err when the dictionary cannot keep it.
]]
local cjson = require("cjson.safe")

local versions = ngx.shared.pyngress_versions
local GENERATION = "#generation"  -- a key no table is named
local PUSHES = "#pushes:"  -- PUSHES .. name: the pushes table `name` took
local TAKING = "#taking:"  -- TAKING .. name: a worker is taking in a whole table `name` (put)
local TAKING_SECONDS = 600  -- forgotten after this long, should the worker die taking it
local SLOW_PUT_SECONDS = 1  -- a whole keyed table taking this long is logged with where the time went
local LOG_KEPT = 256  -- deltas a worker can catch up with before it starts an empty view
-- Keys a view remembers as absent (hosts no Ingress names, asked again and again), at most; then it forgets them
-- all, so that requests for made-up hosts cannot grow a worker's memory.
local ABSENT_KEPT = 4096

local sub = string.sub

require("resty.core.shdict")  -- its C declarations, for store_span
local ffi = require("ffi")
local base = require("resty.core.base")
local json_spans = require("pyngress.json_spans")
local C = ffi.C
local SAFE_STORE, STRING_VALUE = 0x0004, 4  -- safe_set's operation; LUA_TSTRING
local forcible = ffi.new("int[1]")
local errmsg = base.get_errmsg_ptr()

local function clock()
    ngx.update_time()
    return ngx.now()
end

local _M = {}

-- The tables' format this Lua reads: table_schema.py's SCHEMA_VERSION (tests/lua/test_schema_fields.py compares them).
_M.SCHEMA_VERSION = 3

local tables = {}  -- name -> spec
local cache = {}   -- this worker's decoded tables: name -> {pushes = ..., value = ...}

-- Every entry of `entries` checked by spec.entry: error(message) for the first that is not right.
local function check_all(spec, entries)
    for key, raw in pairs(entries) do
        if type(key) ~= "string" then
            error("keys must be strings", 0)
        end
        spec.entry(key, raw)
    end
end

-- The entries spec.entry refuses (key -> message), or nil. One pcall around the whole loop first: a pcall per
-- entry keeps the loop out of the JIT (2-4x slower at 10,000 entries); only when it fails, entry by entry.
local function refused_entries(spec, entries)
    if pcall(check_all, spec, entries) then
        return nil
    end
    local refused = {}
    for key, raw in pairs(entries) do
        local ok, err = type(key) == "string", "keys must be strings"
        if ok then
            ok, err = pcall(spec.entry, key, raw)
        end
        if not ok then
            refused[tostring(key)] = tostring(err)
        end
    end
    return refused
end

-- A worker's view of a keyed table as the dictionary holds it: an entry is decoded and built the first time it
-- is asked for. `absent` remembers keys the dictionary did not have (until a delta logs them).
local function new_view(spec)
    local state = { absent = {}, absent_count = 0 }
    state.value = setmetatable({}, { __index = function(entries, key)
        if type(key) ~= "string" or state.absent[key] then
            return nil
        end
        local text = spec.dict:get("k:" .. key)
        if text == nil then
            if state.absent_count >= ABSENT_KEPT then
                state.absent, state.absent_count = {}, 0
            end
            state.absent[key] = true
            state.absent_count = state.absent_count + 1
            return nil
        end
        local ok, built = pcall(spec.entry, key, cjson.decode(text))
        if not ok then
            -- Cannot happen for an entry that passed put() or put_delta(); answered as if it were absent.
            ngx.log(ngx.ERR, "cannot decode ", spec.name, " entry ", key, ": ", tostring(built))
            return nil
        end
        entries[key] = built
        return built
    end })
    return state
end

-- A view without the entries a delta changed: they are fetched again when asked for.
local function forget(state, key)
    rawset(state.value, key, nil)
    state.absent[key] = nil
end

function _M.define(name, spec)
    spec.name = name
    spec.dict = assert(ngx.shared["pyngress_" .. name], "no lua_shared_dict pyngress_" .. name)
    assert(spec.entry or (spec.load and spec.put), name .. ": a whole table needs put and load")
    tables[name] = spec
end

function _M.defined(name)
    return tables[name] ~= nil
end

-- The C zone of shared dictionary `dict`, for store_span.
local function zone_of(dict)
    return C.ngx_http_lua_ffi_shdict_udata_to_zone(dict[1])
end

-- safe_set(key, the bytes `span` (json_spans.lua: {start, length}) names in `bytes`) on the dictionary of `zone`,
-- without making them a Lua string (json_spans.lua says why).
local function store_span(zone, key, bytes, span)
    local rc = C.ngx_http_lua_ffi_shdict_store(zone, SAFE_STORE, key, #key, STRING_VALUE, bytes + span[1], span[2],
                                               0, 0, 0, errmsg, forcible)
    if rc ~= 0 then
        return nil, ffi.string(errmsg[0])
    end
    return true
end

-- A whole keyed table into the dictionary from its pushed JSON `text`: each entry its own item (its span of the
-- text), the others removed (a refused entry's item, its last good value, is kept), a full mark in the log.
local function put_entries(spec, text, data, refused)
    local dict = spec.dict
    for _, item in ipairs(dict:get_keys(0)) do
        if sub(item, 1, 2) == "k:" and data[sub(item, 3)] == nil then
            dict:delete(item)
        end
    end
    local spans, bytes = json_spans.member_spans(text, "data")
    local zone = zone_of(dict)
    for key in pairs(data) do
        if not (refused and refused[key]) then
            local ok, err = store_span(zone, "k:" .. key, bytes, spans[key])
            if not ok then
                return nil, err
            end
        end
    end
    local seq = (dict:get("seq") or 0) + 1
    dict:set("full", seq)  -- workers behind this decode every entry again
    dict:set("seq", seq)
    return true
end

-- The version and push count are written last: a worker that sees them finds the data they name; then the
-- generation, which tells every worker to look.
local function publish(name, version)
    versions:set(name, version)
    versions:incr(PUSHES .. name, 1, 0)
    versions:incr(GENERATION, 1, 0)
end

-- A delta failed with entries written: no version names what the dictionary holds now (the syncer sends the whole
-- table instead), and every worker looks again.
local function unpublish(name)
    versions:delete(name)
    versions:incr(PUSHES .. name, 1, 0)
    versions:incr(GENERATION, 1, 0)
end

-- The entries of table `name` refused since a push last set them: key -> message.
local function refused_of(spec)
    local refused = cjson.decode(spec.dict:get("refused") or "{}")
    return type(refused) == "table" and refused or {}
end

local function keep_refused(spec, refused)
    if next(refused) == nil then
        spec.dict:delete("refused")
        return true
    end
    return spec.dict:safe_set("refused", cjson.encode(refused))
end

-- nil when `body` follows this Lua's schema, else why it is refused.
local function other_schema(body)
    local schema = body.schema
    if schema == nil then
        schema = 1
    end
    if schema == _M.SCHEMA_VERSION then
        return nil
    end
    return "the body has table schema " .. tostring(schema) .. ", this nginx's Lua reads schema " ..
           _M.SCHEMA_VERSION .. "; run the syncer and nginx's Lua (--template) of the same pyngress release"
end

local function too_small(name, err)
    return "cannot keep " .. name .. " (" .. tostring(err) .. "); raise lua_shared_dict pyngress_" .. name
end

-- Checks and keeps one pushed table; returns the entries it refused (key -> message, each leaving its key's last
-- good value in place), or nil and a message saying what is wrong when the push is refused whole.
local function put_whole(name, text)
    local spec = tables[name]
    if not spec then
        return nil, "no table named " .. tostring(name)
    end
    local started = clock()
    local envelope, err = cjson.decode(text or "")
    if type(envelope) ~= "table" then
        return nil, "the body must be a JSON object" .. (err and (": " .. err) or "")
    end
    local version, data = envelope.version, envelope.data
    if type(version) ~= "string" or version == "" then
        return nil, 'the body needs a "version" string'
    end
    local refusal = other_schema(envelope)
    if refusal then
        return nil, refusal
    end
    -- A JSON array decodes to a table too: each of its items would be refused as a key that is no string, and the
    -- push would empty the table.
    if type(data) ~= "table" or data[1] ~= nil then
        return nil, 'the body needs a "data" object'
    end
    local stored, store_err, refused
    if spec.entry then
        local decoded = clock()
        refused = refused_entries(spec, data)
        local checked_at = clock()
        stored, store_err = put_entries(spec, text, data, refused)
        local done = clock()
        if done - started >= SLOW_PUT_SECONDS then
            ngx.log(ngx.NOTICE, string.format("took the whole %s table, %.1f MB, in %.2f s (decoding %.2f, checking "
                .. "%.2f, storing %.2f)", name, #text / 1e6, done - started, decoded - started, checked_at - decoded,
                done - checked_at))
        end
    else
        local ok, value, whole_refused = pcall(spec.build, data, spec.dict)
        if not ok then
            return nil, name .. ": " .. tostring(value)
        end
        refused = whole_refused
        stored, store_err = spec.put(spec.dict, text, data, value, refused)
    end
    refused = refused or {}
    if stored then
        stored, store_err = keep_refused(spec, refused)
    end
    if not stored then
        return nil, too_small(name, store_err)
    end
    publish(name, version)
    return refused
end

-- put_whole, marked in versions() as under way while it runs: tens of MB take longer than the syncer may wait for an
-- answer, and it must not send them again meanwhile (tables.py).
function _M.put(name, text)
    versions:set(TAKING .. name, true, TAKING_SECONDS)
    local refused, err = put_whole(name, text)
    versions:delete(TAKING .. name)
    return refused, err
end

-- A change to a whole table that takes deltas (spec.change), at the version nginx holds.
local function change_whole(name, spec, version, changed, removed)
    local refused = refused_of(spec)
    local ok, stored, store_err = pcall(spec.change, spec.dict, changed, removed, refused)
    if not ok then
        return nil, name .. ": " .. tostring(stored), 400
    end
    if stored then
        stored, store_err = keep_refused(spec, refused)
    end
    if not stored then
        unpublish(name)
        return nil, too_small(name, store_err), 507
    end
    publish(name, version)
    return refused
end

-- Checks and keeps a change to a keyed table (or a whole one with spec.change); returns the entries refused (as
-- put() does; those of earlier pushes it does not set or delete included), or nil, a message and the HTTP status
-- when the change is refused whole.
function _M.put_delta(name, text)
    local spec = tables[name]
    if not spec or not (spec.entry or spec.change) then
        return nil, "no table taking deltas named " .. tostring(name), 404
    end
    local delta, err = cjson.decode(text or "")
    if type(delta) ~= "table" then
        return nil, "the body must be a JSON object" .. (err and (": " .. err) or ""), 400
    end
    local version, changed, removed = delta.version, delta.set, delta.delete
    if type(version) ~= "string" or version == "" or type(delta.base) ~= "string" then
        return nil, 'the body needs "base" and "version" strings', 400
    end
    local refusal = other_schema(delta)
    if refusal then
        return nil, refusal, 400
    end
    if type(changed) ~= "table" or type(removed) ~= "table" then
        return nil, 'the body needs a "set" object and a "delete" list', 400
    end
    for _, key in ipairs(removed) do
        if type(key) ~= "string" then
            return nil, '"delete" must be a list of strings', 400
        end
    end
    if versions:get(name) ~= delta.base then
        return nil, name .. " is at version " .. tostring(versions:get(name)) .. ", not " .. delta.base ..
                    "; send the whole table", 409
    end
    if not spec.entry then
        return change_whole(name, spec, version, changed, removed)
    end
    local refused_now = refused_entries(spec, changed)
    local refused, keys, count = refused_of(spec), {}, 0
    local dict = spec.dict
    local spans, bytes = json_spans.member_spans(text, "set")
    local zone = zone_of(dict)
    for key in pairs(changed) do
        refused[key] = nil
        if not (refused_now and refused_now[key]) then
            local ok, store_err = store_span(zone, "k:" .. key, bytes, spans[key])
            if not ok then
                unpublish(name)
                return nil, too_small(name, store_err), 507
            end
            count = count + 1
            keys[count] = key
        end
    end
    for _, key in ipairs(removed) do
        dict:delete("k:" .. key)
        refused[key] = nil
        count = count + 1
        keys[count] = key
    end
    for key, message in pairs(refused_now or {}) do
        refused[key] = message
    end
    local ok, store_err = keep_refused(spec, refused)
    if not ok then
        unpublish(name)
        return nil, too_small(name, store_err), 507
    end
    local seq = (dict:get("seq") or 0) + 1
    dict:set("log:" .. seq, cjson.encode(keys))
    dict:delete("log:" .. (seq - LOG_KEPT))
    dict:set("seq", seq)
    publish(name, version)
    return refused
end

local checked = 0  -- the generation this worker last read (refresh)

-- Reads the generation: the tables `current` returns are then at least as new as every push before now.
function _M.refresh()
    checked = versions:get(GENERATION) or 0
end

-- The number of pushes nginx has taken (any table): it changes when the syncer has pushed anything.
function _M.generation()
    return versions:get(GENERATION) or 0
end

-- A worker's view of a keyed table brought from `cached` up to the dictionary's log position `seq`, in place: the
-- entries each logged delta changed are dropped. False when the log does not reach back that far (or a whole
-- table came since): only a new view is right then.
local function caught_up(spec, cached, seq)
    local dict = spec.dict
    if not cached or (dict:get("full") or 0) > cached.seq or seq - cached.seq > LOG_KEPT then
        return false
    end
    for n = cached.seq + 1, seq do
        local keys = cjson.decode(dict:get("log:" .. n) or "null")
        if type(keys) ~= "table" then
            return false
        end
        for _, key in ipairs(keys) do
            forget(cached, key)
        end
    end
    return true
end

-- A whole table (certificates) decoded from the dictionary; nil when it cannot be.
local function loaded(spec, name)
    local ok, value = pcall(spec.load, spec.dict)
    if not ok then
        -- Cannot happen for a table that passed put().
        ngx.log(ngx.ERR, "cannot decode ", name, " version ", tostring(versions:get(name)), ": ", tostring(value))
        return nil
    end
    return value
end

-- The table `name` as of the last refresh() in this worker: a keyed table as a view that decodes the entries
-- asked for, a whole table decoded once per push.
function _M.current(name)
    local cached = cache[name]
    if cached and cached.generation == checked then
        return cached.value
    end
    local pushes = versions:get(PUSHES .. name)
    if cached and cached.pushes == pushes then
        cached.generation = checked
        return cached.value
    end
    local spec = tables[name]
    if spec.entry then
        local seq = spec.dict:get("seq") or 0
        local ok, kept = pcall(caught_up, spec, cached, seq)
        if not (ok and kept) then
            cached = new_view(spec)
            cache[name] = cached
        end
        cached.pushes, cached.generation, cached.seq = pushes, checked, seq
        return cached.value
    end
    local value = loaded(spec, name)
    if value == nil then
        if cached then
            return cached.value  -- keep serving what this worker had
        end
        value = spec.build({})
    end
    cache[name] = { pushes = pushes, generation = checked, value = value }
    return value
end

-- The decoded table `name` as of its current version.
function _M.get(name)
    _M.refresh()
    return _M.current(name)
end

function _M.versions()
    local out, taking = {}, {}
    for name in pairs(tables) do
        out[name] = versions:get(name) or cjson.null
        if versions:get(TAKING .. name) then
            taking[#taking + 1] = name
        end
    end
    out.taking = taking
    return out
end

-- Each table's entries refused by the pushes that made the version it holds: {name: {key: message}}.
function _M.refused()
    local out = {}
    for name, spec in pairs(tables) do
        out[name] = refused_of(spec)
    end
    return out
end

-- A keyed table's journal (`<table>.deltas`: the deltas pushed since its whole file, one per line) applied in order;
-- it stops at the first delta refused (a line cut short, or a journal older than the whole file, whose first base is
-- not the version held).
local function replay_journal(name, path)
    local file = io.open(path, "rb")
    if not file then
        return
    end
    local applied = 0
    for line in file:lines() do
        local ok, err = _M.put_delta(name, line)
        if not ok then
            ngx.log(ngx.NOTICE, "stopped ", path, " after ", applied, " deltas: ", err)
            break
        end
        applied = applied + 1
    end
    file:close()
    ngx.log(ngx.NOTICE, "applied ", applied, " deltas to ", name, " from ", path)
end

-- Fills empty dictionaries from the syncer's state files (a master started afresh; after a HUP
-- the dictionaries still hold everything and are left alone).
function _M.load_state_files(dir)
    for name, spec in pairs(tables) do
        if not versions:get(name) then
            local path = dir .. "/" .. name .. ".json"
            local file = io.open(path, "rb")
            if file then
                local text = file:read("*a")
                file:close()
                local ok, err = _M.put(name, text)
                if ok then
                    ngx.log(ngx.NOTICE, "loaded ", name, " from ", path)
                    if spec.entry or spec.change then
                        replay_journal(name, dir .. "/" .. name .. ".deltas")
                    end
                else
                    ngx.log(ngx.ERR, "ignored ", path, ": ", err)
                end
            end
        end
    end
end

return _M
