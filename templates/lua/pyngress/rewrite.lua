--[[
use-regex and rewrite-target (services/syncer/annotations/rewrite.py): on a host in regex mode the non-Exact
paths are regular expressions, matched case-insensitively from the start of the URI in the order the table
gives them (longest first, as ingress-nginx orders its `location ~*` blocks); a route's rewrite-target then
becomes the URI sent to the backend, with $1..$9 taken from the captures.
]]
local pcre = require("pyngress.pcre")

local re_match = ngx.re.match
local gsub = string.gsub

local _M = {}

local FLAGS = "ijo"  -- case-insensitive, JIT-compiled, compiled once per worker

-- [[path, route] ...] with the routes already built -> { {pattern, route}, ... }; a pattern PCRE refuses
-- refuses the host's entry, as any malformed entry does (the syncer checks them before it pushes).
function _M.compile(pairs_, host)
    local list = {}
    for i, pair in ipairs(pairs_) do
        list[i] = { pcre.checked("^" .. pair[1], FLAGS, host .. ": path " .. pair[1]), pair[2] }
    end
    return list
end

-- The first route whose pattern matches `uri`, and the captures.
function _M.match(list, uri)
    for i = 1, #list do
        local item = list[i]
        local captures = re_match(uri, item[1], FLAGS)
        if captures then
            return item[2], captures
        end
    end
    return nil
end

-- `target` ("/$2") with $N replaced by capture N ("" when the group did not take part).
function _M.target(target, captures)
    local uri = gsub(target, "%$(%d)", function(n)
        local value = captures and captures[tonumber(n)]
        return type(value) == "string" and value or ""
    end)
    if uri == "" then
        return "/"
    end
    return uri
end

return _M
