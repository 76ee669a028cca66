--[[
auth-url in Lua: the signin redirect, and the auth request itself when auth-keepalive is set.

ask(): with auth-keepalive the auth request is a Lua subrequest (ngx.location.capture reads the service's whole
answer, so its connection can go back to the upstream's keepalive pool; nginx's auth_request reads only the
header and cannot). 2xx lets the request through, with auth-response-headers and Set-Cookie taken from the
answer; 401 and 403 go back to the client (error_page turns a 401 into the signin redirect); anything else,
the service unreachable included, is a 500. As auth_request, the subrequest is a GET without the body.

signin(): the redirect a 401 from auth-url becomes (ingress-nginx's semantics).

The signin URL may hold a few nginx variables (auth-signin's validator allows only those expanded here).
Unless its query already carries the redirect parameter ("rd" unless auth-signin-redirect-param says
otherwise), the parameter is added with the original URL: scheme://Host header + the request URI escaped.
]]
local escape_uri, gsub, find, concat = ngx.escape_uri, string.gsub, string.find, table.concat

local _M = {}

local expand = {
    host = function() return ngx.var.host end,
    http_host = function() return ngx.var.http_host or "" end,
    best_http_host = function() return ngx.var.pyngress_best_http_host end,
    scheme = function() return ngx.var.scheme end,
    pass_access_scheme = function() return ngx.var.pyngress_forwarded_proto end,
    request_uri = function() return ngx.var.request_uri end,
    escaped_request_uri = function() return escape_uri(ngx.var.request_uri) end,
}

local function has_param(query, param)
    local pattern = gsub(param, "%-", "%%-")
    return find("&" .. query, "&" .. pattern .. "=[^&#]") ~= nil
end

function _M.signin(url, param)
    local target = gsub(url, "%$([%w_]+)", function(name)
        local value = expand[name]
        return value and value() or nil
    end)
    local query = url:match("%?([^#]*)")
    if query == nil or not has_param(query, param) then
        local original = expand.pass_access_scheme() .. "://" .. expand.http_host() .. expand.escaped_request_uri()
        target = target .. (query == nil and "?" or "&") .. param .. "=" .. original
    end
    return ngx.redirect(target, ngx.HTTP_MOVED_TEMPORARILY)
end

-- A header the service sent once or several times (a list), as one value; nil when it sent none.
local function single(value)
    if type(value) == "table" then
        return concat(value, ", ")
    end
    return value
end

-- options: share_vars (the subrequest shares this request's variables: the router's are safe, being set in
-- `location /`), response_headers (names copied to the request to the backend, through
-- $pyngress_auth_response_<i - 1>).
function _M.ask(path, options)
    local var = ngx.var
    -- Without shared variables the subrequest still gets the route's labels: auth-cache-key keys by them.
    local answer = ngx.location.capture(path, { method = ngx.HTTP_GET, body = "", share_all_vars = options.share_vars,
                                                vars = { pyngress_metric = var.pyngress_metric } })
    local status, headers = answer.status, answer.header
    -- One cookie, as auth_request_set's $upstream_http_set_cookie gives it (auth-always-set-cookie decides
    -- whether the client gets it with an error).
    local cookie = headers["Set-Cookie"]
    var.pyngress_auth_cookie = type(cookie) == "table" and cookie[1] or cookie or ""
    if status >= 200 and status < 300 then
        for i, name in ipairs(options.response_headers) do
            var["pyngress_auth_response_" .. (i - 1)] = single(headers[name]) or ""
        end
        return
    end
    if status == ngx.HTTP_UNAUTHORIZED or status == ngx.HTTP_FORBIDDEN then
        return ngx.exit(status)
    end
    ngx.log(ngx.ERR, "auth request ", path, " answered ", status, "; answering 500")
    return ngx.exit(ngx.HTTP_INTERNAL_SERVER_ERROR)
end

return _M
