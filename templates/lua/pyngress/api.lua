--[[
The configuration API, used by the syncer; nginx serves it on a Unix socket in a root-only directory
(<run-dir>/nginx/config.sock), never on TCP, because whoever reaches it can re-route every host:

  POST /configuration/routes|backends|certificates   body {"version": "...", "data": {...}}
       201 {"refused": {"<key>": "<why>", ...}} when kept: every entry but the refused ones, which keep their last
       good value (store.lua); 400 with the reason when the body itself is malformed (nothing of it is applied)
  POST /configuration/routes|backends|certificates/delta   body {"base": "...", "version": "...", "set": {...},
       "delete": [...]} (certificates: keys "certs/<id>", "hosts/<host>", "default", certificates.lua)
       201 {"refused": {...}} as above (with the entries earlier pushes refused that it does not set or delete);
       409 when nginx holds another version than "base"; 400 when the body is malformed
  GET  /configuration/versions   {"routes": "<version>" | null, "backends": ..., "certificates": ...,
       "taking": ["<table>", ...]}: "taking" names the tables a worker is taking in whole right now
  GET  /configuration/refused    {"routes": {"<key>": "<why>", ...}, "backends": ..., "certificates": ...}
  GET  /configuration/metrics    the request-metrics batches recorded since the last GET (monitor.lua)
  GET  /configuration/spans      the tracer's settings and spans batches recorded since the last GET (tracing.lua)
]]
local cjson = require("cjson.safe")
local store = require("pyngress.store")
local monitor = require("pyngress.monitor")
local tracing = require("pyngress.tracing")

local match = string.match

local _M = {}

local function respond(status, body)
    ngx.status = status
    ngx.header["Content-Type"] = "application/json"
    ngx.print(body)
end

local function fail(status, message)
    respond(status, cjson.encode({ error = message }))
end

local function request_body()
    ngx.req.read_body()
    local body = ngx.req.get_body_data()
    if body then
        return body
    end
    -- Only when the body outgrew client_body_buffer_size, which nginx.conf sets to the maximum.
    local path = ngx.req.get_body_file()
    local file = path and io.open(path, "rb")
    if not file then
        return nil
    end
    body = file:read("*a")
    file:close()
    return body
end

-- What GET /configuration/<name> answers (JSON text).
local READS = {
    versions = function() return cjson.encode(store.versions()) end,
    refused = function() return cjson.encode(store.refused()) end,
    metrics = monitor.take,
    spans = tracing.take,
}

function _M.handle()
    local method = ngx.req.get_method()
    local uri = ngx.var.uri
    local name = match(uri, "^/configuration/(%a+)$")
    local delta = match(uri, "^/configuration/(%a+)/delta$")
    local read = name and READS[name]
    if read then
        if method ~= "GET" then
            return fail(405, "use GET")
        end
        return respond(200, read())
    end
    name = name or delta
    if not name or not store.defined(name) then
        return fail(404, "no such table; use /configuration/routes, backends, certificates, versions, refused, "
                         .. "metrics or spans")
    end
    if method ~= "POST" then
        return fail(405, "use POST")
    end
    local refused, err, status
    if delta then
        refused, err, status = store.put_delta(name, request_body())
    else
        refused, err, status = store.put(name, request_body())
    end
    if not refused then
        if status ~= 409 then
            ngx.log(ngx.WARN, "refused ", name, " push: ", err)
        end
        return fail(status or 400, err)
    end
    respond(201, cjson.encode({ refused = refused }))
end

return _M
