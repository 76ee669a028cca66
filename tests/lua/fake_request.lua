-- What a request gives the modules under test, in nginx's init phase where there is none: ngx.var and ngx.header as
-- plain tables, and ngx.exec, ngx.redirect, ngx.exit and ngx.req recording what the module asked for; the calls of
-- pyngress's nginx module about a request hand it to the Lua balancer ($pg_bal). Every other ngx API (shared
-- dictionaries, ngx.re, ngx.md5, ...) is nginx's own, and the module's peers objects are its own.
local native = require("pyngress.native")

local _M = {}

local NAMES = { "var", "header", "ctx", "req", "exec", "redirect", "exit" }
local NATIVE_NAMES = { "balance", "forget", "measure_ewma" }
local saved = nil
local saved_native = {}

-- Starts a request with these variables; returns what the module answers: {exec = location} or {redirect = url,
-- status = n} or {status = n}, and {uri = ...} when it set the URI, {headers = ...} the request headers it set (false:
-- cleared). `request` may give the method, the headers (lower-case names) and the query arguments.
function _M.start(vars, request)
    request = request or {}
    if not saved then
        saved = {}
        for _, name in ipairs(NAMES) do
            saved[name] = rawget(ngx, name)
        end
        for _, name in ipairs(NATIVE_NAMES) do
            saved_native[name] = native[name]
        end
    end
    local answer = { headers = {} }
    native.balance = function() return false end
    native.forget = function() end
    native.measure_ewma = function() return true end
    rawset(ngx, "var", vars or {})
    rawset(ngx, "header", {})
    rawset(ngx, "ctx", {})
    rawset(ngx, "req", {
        http_version = function() return 1.1 end,
        set_uri = function(uri) answer.uri = uri end,
        set_header = function(name, value) answer.headers[name] = value end,
        clear_header = function(name) answer.headers[name] = false end,
        get_method = function() return request.method or "GET" end,
        get_headers = function() return request.headers or {} end,
        get_uri_args = function() return request.args or {} end,
    })
    rawset(ngx, "exec", function(location) answer.exec = location end)
    rawset(ngx, "redirect", function(url, status) answer.redirect, answer.status = url, status or 302 end)
    rawset(ngx, "exit", function(status) answer.status = status end)
    return answer
end

function _M.finish()
    if saved then
        for _, name in ipairs(NAMES) do
            rawset(ngx, name, saved[name])
        end
        for _, name in ipairs(NATIVE_NAMES) do
            native[name] = saved_native[name]
        end
    end
end

return _M
