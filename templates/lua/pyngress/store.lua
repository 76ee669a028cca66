--[[
The tables the syncer pushes (routes, backends, certificates), kept in shared dictionaries so that every
worker sees them, survive a HUP reload, and change without one.

A table arrives as the body of `POST /configuration/<table>` and is also kept by the syncer in
`<state-dir>/dynamic/<table>.json` (read here when a freshly started master has empty dictionaries):

    {"version": "<content hash>", "data": <the table>}

`pyngress_versions` holds the version of each table, and a generation number that every push increments;
the table itself lives in `pyngress_<table>`. Each worker decodes a table once per version. A request
reads the generation once (`refresh`, in the router) and then takes its tables from the worker's cache
(`current`, also in the balancer of the same request): outside the JIT, every shared-dictionary read
costs about half a microsecond, which each request would otherwise pay per table it uses.

A table module registers with `define(name, spec)`:
  spec.build(data) -> value   checks `data` (error(message) when it is malformed) and returns what
                              the workers use; a push that does not build is refused whole.
  spec.put(dict, text, data, value) -> ok, err   optional: how to keep it (default: the body as is).
  spec.load(dict) -> value    optional: what `get` returns, from the dictionary.
]]
local cjson = require("cjson.safe")

local versions = ngx.shared.pyngress_versions
local GENERATION = "#generation"  -- a key no table is named

local _M = {}

local tables = {}  -- name -> spec
local cache = {}   -- this worker's decoded tables: name -> {version = ..., value = ...}

local function keep_body(dict, text)
    return dict:safe_set("data", text)
end

function _M.define(name, spec)
    spec.name = name
    spec.dict = assert(ngx.shared["pyngress_" .. name], "no lua_shared_dict pyngress_" .. name)
    spec.put = spec.put or keep_body
    spec.load = spec.load or function(dict)
        local text = dict:get("data")
        local envelope = text and cjson.decode(text)
        return spec.build(envelope and envelope.data or {})
    end
    tables[name] = spec
end

function _M.defined(name)
    return tables[name] ~= nil
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
    local stored, store_err = spec.put(spec.dict, text, data, value)
    if not stored then
        return nil, "cannot keep " .. name .. " (" .. tostring(store_err) .. "); raise lua_shared_dict pyngress_" .. name
    end
    -- The version is written last: a worker that sees it finds the data it names; then the generation,
    -- which tells every worker to look.
    versions:set(name, version)
    versions:incr(GENERATION, 1, 0)
    return true
end

local checked = 0  -- the generation this worker last read (refresh)

-- Reads the generation: the tables `current` returns are then at least as new as every push before now.
function _M.refresh()
    checked = versions:get(GENERATION) or 0
end

-- The decoded table `name` as of the last refresh() in this worker (decoded once per version).
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
    local ok, value = pcall(spec.load, spec.dict)
    if not ok then
        -- Cannot happen for a table that passed put(); keep serving what this worker had.
        ngx.log(ngx.ERR, "cannot decode ", name, " version ", tostring(version), ": ", tostring(value))
        if entry then
            return entry.value
        end
        value = spec.build({})
    end
    cache[name] = { version = version, generation = checked, value = value }
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
