--[[
The HTTPRoute CORS filter at request time (the Gateway API's semantics, not the enable-cors annotation's: cors.lua).

A policy is what gateway.lua (cors_of) built from an action's "cors" entry:
    {any_origin = bool, origins = {{scheme = "https", host = "a.example.com" | "*.example.com" | "*", port = 443}},
     methods = {"GET", ...} | {"*"}, headers = {...} | {"*"}, expose = {...}, credentials = bool, max_age = n,
     methods_text, headers_text, expose_text (the lists joined with ", ")}

An origin is scheme://host[:port], the port being the scheme's own when it names none; "*.example.com" takes any number
of labels before ".example.com". A request from an allowed origin gets Access-Control-Allow-Origin with its Origin
echoed (always valid, and required with credentials); a "*" in allowMethods or allowHeaders echoes what the preflight
asks for. A preflight (OPTIONS with Origin and Access-Control-Request-Method) is answered 204 here, with the CORS
headers only for an allowed origin; it never reaches the backend.
]]
local lower, match, concat = string.lower, string.match, table.concat

local _M = {}

local DEFAULT_PORTS = { http = 80, https = 443 }

-- The lists joined as the response headers carry them, computed once per pushed entry.
function _M.prepare(policy)
    policy.methods_text = #policy.methods > 0 and concat(policy.methods, ", ") or nil
    policy.headers_text = #policy.headers > 0 and concat(policy.headers, ", ") or nil
    local exposes_any = false
    for _, name in ipairs(policy.expose) do
        exposes_any = exposes_any or name == "*"
    end
    -- With credentials a "*" would be taken literally by browsers: the spec forbids sending it then.
    policy.expose_text = #policy.expose > 0 and not (exposes_any and policy.credentials)
        and concat(policy.expose, ", ") or nil
    return policy
end

local function host_allowed(pattern, host)
    if pattern == host or pattern == "*" then
        return true
    end
    if match(pattern, "^%*%.") then
        local suffix = pattern:sub(2)  -- ".example.com"
        return #host > #suffix and host:sub(-#suffix) == suffix
    end
    return false
end

-- The request's Origin when the policy allows it, else nil.
local function allowed_origin(policy)
    local origin = ngx.var.http_origin
    if not origin then
        return nil
    end
    if policy.any_origin then
        return origin
    end
    local scheme, host, port = match(lower(origin), "^(https?)://([^/:]+):?(%d*)$")
    if not scheme then
        return nil
    end
    port = tonumber(port) or DEFAULT_PORTS[scheme]
    local origins = policy.origins
    for i = 1, #origins do
        local allowed = origins[i]
        if allowed.scheme == scheme and allowed.port == port and host_allowed(allowed.host, host) then
            return origin
        end
    end
    return nil
end

function _M.is_preflight()
    local var = ngx.var
    return var.request_method == "OPTIONS" and var.http_origin ~= nil
        and var.http_access_control_request_method ~= nil
end

-- Answers a preflight with 204: the CORS headers for an allowed origin, none for another.
function _M.preflight(policy)
    local origin = allowed_origin(policy)
    local header = ngx.header
    if origin then
        local var = ngx.var
        header["Access-Control-Allow-Origin"] = origin
        header["Vary"] = "Origin"
        if policy.credentials then
            header["Access-Control-Allow-Credentials"] = "true"
        end
        local methods = policy.methods_text
        if methods == "*" then
            methods = var.http_access_control_request_method
        end
        header["Access-Control-Allow-Methods"] = methods
        local headers = policy.headers_text
        if headers == "*" then
            headers = var.http_access_control_request_headers
        end
        header["Access-Control-Allow-Headers"] = headers
        header["Access-Control-Expose-Headers"] = policy.expose_text
        header["Access-Control-Max-Age"] = policy.max_age
    end
    header["Content-Length"] = 0
    return ngx.exit(204)
end

-- The response header changes of a request that is not a preflight (gateway.lua's header changes format), or nil
-- when its origin is not allowed.
function _M.response_changes(policy)
    local origin = allowed_origin(policy)
    if not origin then
        return nil
    end
    local set = { { "Access-Control-Allow-Origin", origin } }
    if policy.credentials then
        set[#set + 1] = { "Access-Control-Allow-Credentials", "true" }
    end
    if policy.expose_text then
        set[#set + 1] = { "Access-Control-Expose-Headers", policy.expose_text }
    end
    return { set = set, add = { { "Vary", "Origin" } }, remove = {} }
end

return _M
