--[[
CORS for the location profiles of Ingresses with enable-cors (ingress-nginx's semantics).

The options of each profile come from nginx.conf (render.py → boot.master → settings.cors[profile]):
    {allow_origin = "*" | "https://a.example.com,https://*.example.com:8443", allow_methods = "GET,POST",
     allow_headers = "X-Api-Key", expose_headers = "X-Request-Id" (optional),
     allow_credentials = "true" | "false", max_age = "1728000"}

A request whose Origin is allowed ("*" allows any) gets the Access-Control-* headers on its response; a
preflight (OPTIONS) with an allowed origin is answered here with 204 and never reaches the backend. A
"*." in an origin stands for exactly one DNS label. Requests from other origins pass unchanged.
]]
local settings = require("pyngress.settings")

local find, sub, lower, gmatch = string.find, string.sub, string.lower, string.gmatch

local _M = {}

local compiled = {}  -- profile -> {any, exact = {origin = true}, wildcards = {{head, tail}}}

local function compile(options)
    local rules = { any = false, exact = {}, wildcards = {} }
    for origin in gmatch(options.allow_origin or "", "[^,]+") do
        origin = lower(origin)
        local star = find(origin, "*.", 1, true)
        if origin == "*" then
            rules.any = true
        elseif star then
            rules.wildcards[#rules.wildcards + 1] = { sub(origin, 1, star - 1), sub(origin, star + 1) }
        else
            rules.exact[origin] = true
        end
    end
    return rules
end

local function rules_of(profile)
    local options = settings.cors[profile]
    if not options then
        return nil
    end
    local rules = compiled[profile]
    if not rules or rules.options ~= options then
        rules = compile(options)
        rules.options = options
        compiled[profile] = rules
    end
    return rules
end

-- The Access-Control-Allow-Origin value for this request, or nil when its origin is not allowed.
local function allowed_origin(rules)
    if rules.any then
        return "*"
    end
    local origin = ngx.var.http_origin
    if not origin then
        return nil
    end
    local wanted = lower(origin)
    if rules.exact[wanted] then
        return origin
    end
    for _, rule in ipairs(rules.wildcards) do
        local head, tail = rule[1], rule[2]
        local label_end = #wanted - #tail
        if label_end > #head and sub(wanted, 1, #head) == head and sub(wanted, label_end + 1) == tail
            and not find(sub(wanted, #head + 1, label_end), "[^a-z0-9-]") then
            return origin
        end
    end
    return nil
end

-- access_by_lua: answer a preflight from an allowed origin.
function _M.preflight(profile)
    if ngx.req.get_method() ~= "OPTIONS" then
        return
    end
    local rules = rules_of(profile)
    if rules and allowed_origin(rules) then
        ngx.header["Content-Type"] = "text/plain; charset=utf-8"
        ngx.header["Content-Length"] = 0
        return ngx.exit(204)
    end
end

-- header_filter_by_lua: the Access-Control-* headers on every response to an allowed origin.
function _M.add_headers(profile)
    local rules = rules_of(profile)
    local origin = rules and allowed_origin(rules)
    if not origin then
        return
    end
    local options, header = rules.options, ngx.header
    header["Access-Control-Allow-Origin"] = origin
    if options.allow_credentials == "true" then
        header["Access-Control-Allow-Credentials"] = "true"
    end
    header["Access-Control-Allow-Methods"] = options.allow_methods
    header["Access-Control-Allow-Headers"] = options.allow_headers
    header["Access-Control-Expose-Headers"] = options.expose_headers
    header["Access-Control-Max-Age"] = options.max_age
end

return _M
