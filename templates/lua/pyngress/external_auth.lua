--[[
auth-signin: the redirect a 401 from auth-url becomes (ingress-nginx's semantics).

The signin URL may hold a few nginx variables (auth-signin's validator allows only those expanded here).
Unless its query already carries the redirect parameter ("rd" unless auth-signin-redirect-param says
otherwise), the parameter is added with the original URL: scheme://Host header + the request URI escaped.
]]
local escape_uri, gsub, find = ngx.escape_uri, string.gsub, string.find

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

return _M
