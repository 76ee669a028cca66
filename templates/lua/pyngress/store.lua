--[[
The tables the syncer pushes (routes, backends, certificates), kept in shared dictionaries so that every
worker sees them, survive a HUP reload, and change without one.

A whole table arrives as the body of `POST /configuration/<table>` and is also kept by the syncer in
`<state-dir>/dynamic/<table>.json` (read here when a freshly started master has empty dictionaries):

    {"version": "<content hash>", "data": <the table>}

A keyed table (routes: host -> its routes; backends: name -> endpoints) also takes a change to the version
nginx holds, as the body of `POST /configuration/<table>/delta`:

    {"base": "<the version it applies to>", "version": "<the new one>", "set": {key: entry}, "delete": [key]}

refused with 409 when nginx holds another version than `base` (the syncer then sends the whole table). So a
change to one host of 10,000 moves one entry, not the table: each entry is its own dictionary item
("k:<key>", its JSON), each delta's keys are logged ("log:<n>", the last LOG_KEPT of them), and a worker brings
its decoded table up to date by decoding only the logged entries (a worker further behind, or after a whole
table, decodes every entry again).

`pyngress_versions` holds the version of each table, and a generation number that every push increments;
the table itself lives in `pyngress_<table>`. A request reads the generation once (`refresh`, in the router)
and then takes its tables from the worker's cache (`current`, also in the balancer of the same request):
outside the JIT, every shared-dictionary read costs about half a microsecond, which each request would
otherwise pay per table it uses.

A table module registers with `define(name, spec)`:
  spec.entry(key, data) -> value  a keyed table: checks one entry (error(message) when it is malformed) and
                                  returns what the workers use; a push with one that does not build is
                                  refused whole.
  spec.build(data) -> value       a whole table (certificates): the same for the whole table.
  spec.put(dict, text, data, value) -> ok, err   whole tables: how to keep it in the dictionary.
  spec.load(dict) -> value        whole tables: what `get` returns, from the dictionary.
]]
local cjson = require("cjson.safe")

local versions = ngx.shared.pyngress_versions
local GENERATION = "#generation"  -- a key no table is named
local LOG_KEPT = 256  -- deltas a worker can catch up with before it decodes the whole table again

local sub = string.sub

local _M = {}

local tables = {}  -- name -> spec
local cache = {}   -- this worker's decoded tables: name -> {version = ..., value = ...}

-- A keyed table's entries, each checked by spec.entry.
local function build_keyed(spec, data)
    local value = {}
    for key, raw in pairs(data) do
        if type(key) ~= "string" then
            error(spec.name .. " keys must be strings", 0)
        end
        value[key] = spec.entry(key, raw)
    end
    return value
end

-- A keyed table as the dictionary holds it: every "k:" item decoded and built.
local function load_keyed(spec, dict)
    local value = {}
    for _, item in ipairs(dict:get_keys(0)) do
        if sub(item, 1, 2) == "k:" then
            local text = dict:get(item)
            if text then
                local key = sub(item, 3)
                value[key] = spec.entry(key, cjson.decode(text))
            end
        end
    end
    return value
end

function _M.define(name, spec)
    spec.name = name
    spec.dict = assert(ngx.shared["pyngress_" .. name], "no lua_shared_dict pyngress_" .. name)
    if spec.entry then
        spec.build = function(data)
            return build_keyed(spec, data)
        end
        spec.load = function(dict)
            return load_keyed(spec, dict)
        end
    end
    assert(spec.load and (spec.entry or spec.put), name .. ": a whole table needs put and load")
    tables[name] = spec
end

function _M.defined(name)
    return tables[name] ~= nil
end

-- A whole keyed table into the dictionary: each entry its own item, the others removed, a full mark in the log.
local function put_entries(spec, data)
    local dict = spec.dict
    for _, item in ipairs(dict:get_keys(0)) do
        if sub(item, 1, 2) == "k:" and data[sub(item, 3)] == nil then
            dict:delete(item)
        end
    end
    for key, raw in pairs(data) do
        local ok, err = dict:safe_set("k:" .. key, cjson.encode(raw))
        if not ok then
            return nil, err
        end
    end
    local seq = (dict:get("seq") or 0) + 1
    dict:set("full", seq)  -- workers behind this decode every entry again
    dict:set("seq", seq)
    return true
end

-- The version is written last: a worker that sees it finds the data it names; then the generation, which
-- tells every worker to look.
local function publish(name, version)
    versions:set(name, version)
    versions:incr(GENERATION, 1, 0)
end

-- Checks and keeps one pushed table; returns nil and a message saying what is wrong when refused.
function _M.put(name, text)
    local spec = tables[name]
    if not spec then
        return nil, "no table named " .. tostring(name)
    end
    local envelope, err = cjson.decode(text or "")
    if type(envelope) ~= "table" then
        return nil, "the body must be a JSON object" .. (err and (": " .. err) or "")
    end
    local version, data = envelope.version, envelope.data
    if type(version) ~= "string" or version == "" then
        return nil, 'the body needs a "version" string'
    end
    if type(data) ~= "table" then
        return nil, 'the body needs a "data" object'
    end
    local ok, value = pcall(spec.build, data)
    if not ok then
        return nil, name .. ": " .. tostring(value)
    end
    local stored, store_err
    if spec.entry then
        stored, store_err = put_entries(spec, data)
    else
        stored, store_err = spec.put(spec.dict, text, data, value)
    end
    if not stored then
        return nil, "cannot keep " .. name .. " (" .. tostring(store_err) .. "); raise lua_shared_dict pyngress_" .. name
    end
    publish(name, version)
    return true
end

-- Checks and keeps a change to a keyed table; returns nil, a message and the HTTP status when refused.
function _M.put_delta(name, text)
    local spec = tables[name]
    if not spec or not spec.entry then
        return nil, "no keyed table named " .. tostring(name), 404
    end
    local delta, err = cjson.decode(text or "")
    if type(delta) ~= "table" then
        return nil, "the body must be a JSON object" .. (err and (": " .. err) or ""), 400
    end
    local version, changed, removed = delta.version, delta.set, delta.delete
    if type(version) ~= "string" or version == "" or type(delta.base) ~= "string" then
        return nil, 'the body needs "base" and "version" strings', 400
    end
    if type(changed) ~= "table" or type(removed) ~= "table" then
        return nil, 'the body needs a "set" object and a "delete" list', 400
    end
    if versions:get(name) ~= delta.base then
        return nil, name .. " is at version " .. tostring(versions:get(name)) .. ", not " .. delta.base ..
                    "; send the whole table", 409
    end
    local keys = {}
    for key, raw in pairs(changed) do
        if type(key) ~= "string" then
            return nil, name .. " keys must be strings", 400
        end
        local ok, problem = pcall(spec.entry, key, raw)
        if not ok then
            return nil, name .. ": " .. tostring(problem), 400
        end
        keys[#keys + 1] = key
    end
    for _, key in ipairs(removed) do
        if type(key) ~= "string" then
            return nil, name .. " keys must be strings", 400
        end
        keys[#keys + 1] = key
    end
    local dict = spec.dict
    for key, raw in pairs(changed) do
        local ok, store_err = dict:safe_set("k:" .. key, cjson.encode(raw))
        if not ok then
            -- Entries are written: only a whole table can make the dictionary consistent again.
            versions:delete(name)
            return nil, "cannot keep " .. name .. " (" .. tostring(store_err) .. "); raise lua_shared_dict pyngress_"
                        .. name, 507
        end
    end
    for _, key in ipairs(removed) do
        dict:delete("k:" .. key)
    end
    local seq = (dict:get("seq") or 0) + 1
    dict:set("log:" .. seq, cjson.encode(keys))
    dict:delete("log:" .. (seq - LOG_KEPT))
    dict:set("seq", seq)
    publish(name, version)
    return true
end

local checked = 0  -- the generation this worker last read (refresh)

-- Reads the generation: the tables `current` returns are then at least as new as every push before now.
function _M.refresh()
    checked = versions:get(GENERATION) or 0
end

-- A worker's keyed table brought from `entry` (its cache) to the dictionary's latest entries by replaying the
-- logged changes; nil when the log does not reach back that far (or a whole table came since).
local function caught_up(spec, entry, seq)
    local dict = spec.dict
    if not entry or not entry.seq or (dict:get("full") or 0) > entry.seq or seq - entry.seq > LOG_KEPT then
        return nil
    end
    local value = {}
    for key, built in pairs(entry.value) do
        value[key] = built
    end
    for n = entry.seq + 1, seq do
        local keys = cjson.decode(dict:get("log:" .. n) or "null")
        if type(keys) ~= "table" then
            return nil
        end
        for _, key in ipairs(keys) do
            local text = dict:get("k:" .. key)
            value[key] = text and spec.entry(key, cjson.decode(text)) or nil
        end
    end
    return value
end

-- The decoded table `name` as of the last refresh() in this worker (decoded once per version; a keyed
-- table only in the entries that changed).
function _M.current(name)
    local entry = cache[name]
    if entry and entry.generation == checked then
        return entry.value
    end
    local version = versions:get(name)
    if entry and entry.version == version then
        entry.generation = checked
        return entry.value
    end
    local spec = tables[name]
    local seq = spec.entry and (spec.dict:get("seq") or 0)
    local ok, value = pcall(caught_up, spec, entry, seq)
    if not ok or value == nil then
        ok, value = pcall(spec.load, spec.dict)
    end
    if not ok then
        -- Cannot happen for a table that passed put(); keep serving what this worker had.
        ngx.log(ngx.ERR, "cannot decode ", name, " version ", tostring(version), ": ", tostring(value))
        if entry then
            return entry.value
        end
        value = spec.build({})
    end
    cache[name] = { version = version, generation = checked, value = value, seq = seq }
    return value
end

-- The decoded table `name` as of its current version.
function _M.get(name)
    _M.refresh()
    return _M.current(name)
end

function _M.versions()
    local out = {}
    for name in pairs(tables) do
        out[name] = versions:get(name) or cjson.null
    end
    return out
end

-- Fills empty dictionaries from the syncer's state files (a master started afresh; after a HUP
-- the dictionaries still hold everything and are left alone).
function _M.load_state_files(dir)
    for name in pairs(tables) do
        if not versions:get(name) then
            local path = dir .. "/" .. name .. ".json"
            local file = io.open(path, "rb")
            if file then
                local text = file:read("*a")
                file:close()
                local ok, err = _M.put(name, text)
                if ok then
                    ngx.log(ngx.NOTICE, "loaded ", name, " from ", path)
                else
                    ngx.log(ngx.ERR, "ignored ", path, ": ", err)
                end
            end
        end
    end
end

return _M
