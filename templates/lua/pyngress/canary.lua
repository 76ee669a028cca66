--[[
Canary releases (services/syncer/annotations/canary.py): whether a request goes to the canary backend of its
route, as ingress-nginx decides it. A route's "canary" entry:

    {"backend": "<name>" | null, "ingress": "ns/name", "header": "<name>" | null, "header_value": ... | null,
     "header_pattern": "<regex>" | null, "cookie": "<name>" | null, "weight": N, "weight_total": M}

Precedence: the header (with header_value: that value sends it to the canary; with header_pattern: a match
does; else "always" does and "never" keeps it off; any other value falls through), then the cookie ("always"
or "never"; else falls through), then the weight (weight requests out of weight_total).
]]
local cjson = require("cjson.safe")
local pcre = require("pyngress.pcre")

local null = cjson.null
local re_find, random = ngx.re.find, math.random
local gsub, lower = string.gsub, string.lower

local _M = {}

local function text(value)
    return type(value) == "string" and value ~= "" and value or nil
end

-- The route table's entry -> what decide() reads (header as ngx.var's http_ name; nil where unset).
function _M.config(raw, where)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" then
        error(where .. ": canary must be an object", 0)
    end
    local weight, total = tonumber(raw.weight) or 0, tonumber(raw.weight_total) or 100
    if total < 1 then
        error(where .. ": canary weight_total must be at least 1", 0)
    end
    local header = text(raw.header)
    local cookie = text(raw.cookie)
    return {
        backend = text(raw.backend),
        header_var = header and ("http_" .. gsub(lower(header), "-", "_")) or nil,
        header_value = text(raw.header_value),
        header_pattern = pcre.checked(text(raw.header_pattern), "jo", where .. ": canary header_pattern"),
        cookie_var = cookie and ("cookie_" .. cookie) or nil,
        weight = weight,
        total = total,
        sticky = raw.sticky == true,
        backend_key = text(raw.backend) and ngx.md5(raw.backend) or nil,  -- as affinity.lua's cookie names it
    }
end

-- true: this request goes to the canary.
function _M.decide(canary)
    local var = ngx.var
    if canary.header_var then
        local value = var[canary.header_var]
        if value then
            if canary.header_value then
                if value == canary.header_value then
                    return true
                end
            elseif canary.header_pattern then
                if re_find(value, canary.header_pattern, "jo") then
                    return true
                end
            elseif value == "always" then
                return true
            elseif value == "never" then
                return false
            end
        end
    end
    if canary.cookie_var then
        local value = var[canary.cookie_var]
        if value == "always" then
            return true
        elseif value == "never" then
            return false
        end
    end
    return canary.weight > 0 and random(canary.total) <= canary.weight
end

return _M
