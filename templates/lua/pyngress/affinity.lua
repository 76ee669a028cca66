--[[
Session affinity by cookie (services/syncer/annotations/affinity.py). A route's "affinity" entry:

    {"cookie": "<name>", "path": "/", "max_age": N | null, "expires": N | null, "secure": bool,
     "samesite": "None" | "Lax" | "Strict" | null, "conditional_samesite_none": bool (optional),
     "domain": "<domain>" (optional)}

The cookie's value names an endpoint and its backend: "<MD5 of address:port>|<MD5 of the backend's name>", the
same in every worker, across reloads and restarts (a value without the backend, from an older pyngress, names
the endpoint alone). The backend part is what keeps a session on a canary (affinity-canary-behavior sticky):
the router asks backend_of() before deciding. In the router (rewrite phase, where response headers can still be set) pick() keeps the
endpoint the cookie names while it is one of the backend's, else picks one at random and sets the cookie; it
leaves the choice in $pyngress_peer for the balancer.
]]
local cjson = require("cjson.safe")

local md5, http_time, time = ngx.md5, ngx.http_time, ngx.time
local concat, random, match = table.concat, math.random, string.match

local null = cjson.null
local _M = {}

local function text(value)
    return type(value) == "string" and value ~= "" and value or nil
end

function _M.config(raw, where)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" or not text(raw.cookie) then
        error(where .. ": affinity must be an object with a cookie name", 0)
    end
    return {
        var = "cookie_" .. raw.cookie,
        name = raw.cookie,
        path = text(raw.path) or "/",
        max_age = tonumber(raw.max_age),
        expires = tonumber(raw.expires),
        secure = raw.secure == true,
        samesite = text(raw.samesite),
        conditional_samesite_none = raw.conditional_samesite_none == true,
        domain = text(raw.domain),
    }
end

-- Clients that reject or misread a cookie with SameSite=None (Chromium's list, which ingress-nginx follows):
-- iOS 12, Safari on macOS 10.14, Chrome 51 to 66, UC Browser before 12.13.2.
local SAMESITE_NONE_INCOMPATIBLE = {
    [[\(iP.+; CPU .*OS 12[_\d]*.*\) AppleWebKit/]],
    [[\(Macintosh;.*Mac OS X 10_14[_\d]*.*\) AppleWebKit/.*(Version/.* Safari/|\(KHTML, like Gecko\)$)]],
    [[Chrom(e|ium)/(5[1-9]|6[0-6])\.]],
    [[UCBrowser/([0-9]|1[01]|12\.([0-9]|1[0-2])|12\.13\.[01])\.]],
}

local function samesite_none_incompatible()
    local agent = ngx.var.http_user_agent
    if not agent then
        return false
    end
    for _, pattern in ipairs(SAMESITE_NONE_INCOMPATIBLE) do
        if ngx.re.find(agent, pattern, "jo") then
            return true
        end
    end
    return false
end

-- peers table (from the backends table) -> { [md5] = "address:port" }, built once per table.
local by_hash = setmetatable({}, { __mode = "k" })

local function hashes(peers)
    local found = by_hash[peers]
    if not found then
        found = {}
        for i = 1, #peers do
            local key = peers[i][1] .. ":" .. peers[i][2]
            found[md5(key)] = i
        end
        by_hash[peers] = found
    end
    return found
end

local function set_cookie(affinity, value)
    local parts = { affinity.name .. "=" .. value, "Path=" .. affinity.path, "HttpOnly" }
    if affinity.max_age then
        parts[#parts + 1] = "Max-Age=" .. affinity.max_age
    end
    if affinity.expires then
        parts[#parts + 1] = "Expires=" .. http_time(time() + affinity.expires)
    end
    if affinity.secure then
        parts[#parts + 1] = "Secure"
    end
    if affinity.domain then
        parts[#parts + 1] = "Domain=" .. affinity.domain
    end
    if affinity.samesite and not (affinity.samesite == "None" and affinity.conditional_samesite_none
                                  and samesite_none_incompatible()) then
        parts[#parts + 1] = "SameSite=" .. affinity.samesite
    end
    ngx.header["Set-Cookie"] = concat(parts, "; ")
end

-- The backend key in the request's cookie (md5 of the backend's name), or nil.
function _M.backend_of(affinity)
    return match(ngx.var[affinity.var] or "", "|(%x+)$")
end

function _M.backend_key(name)
    return name and md5(name) or nil
end

-- Choose the endpoint of this request among the `peers` of `backend`; its index goes to the balancer through
-- $pyngress_peer.
function _M.pick(affinity, peers, backend)
    local var = ngx.var
    local index = hashes(peers)[match(var[affinity.var] or "", "^[^|]*")]
    if not index then
        index = random(#peers)
        set_cookie(affinity, md5(peers[index][1] .. ":" .. peers[index][2]) .. "|" .. md5(backend))
    end
    var.pyngress_peer = index
end

return _M
