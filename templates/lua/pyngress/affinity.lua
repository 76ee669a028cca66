--[[
Session affinity by cookie (services/syncer/annotations/affinity.py). A route's "affinity" entry:

    {"cookie": "<name>", "path": "/app", "max_age": N | null, "expires": N | null, "secure": bool,
     "samesite": "None" | "Lax" | "Strict" | null, "conditional_samesite_none": bool (optional),
     "domain": "<domain>" (optional), "change_on_failure": bool (optional)}

The syncer resolves "path": session-cookie-path, else the route's own Ingress path, as ingress-nginx. The cookie
is Secure over HTTPS, and over HTTP too with "secure" (session-cookie-secure), as ingress-nginx.
The cookie's value is "<key>|<MD5 of the backend's name>". In affinity-mode persistent the key is the MD5 of the
endpoint's address:port: the session keeps its endpoint while it exists, whatever endpoints come and go. In
balanced mode (the default) the key is random and picks the endpoint by rendezvous hashing (hashing.lua), so
when endpoints are added a share of the sessions moves to them, as ingress-nginx's balanced mode rebalances.
Either is the same in every worker, across reloads and restarts. The backend part is what keeps a session on a
canary (affinity-canary-behavior sticky): the router asks backend_of() before deciding. In the router (rewrite
phase, where response headers can still be set) pick() finds the endpoint the cookie names while it is one of
the backend's, else picks one and sets the cookie; the router hands the choice to the balancer.

When that endpoint fails (proxy_next_upstream), $pyngress_affinity tells the balancer what to do, as
ingress-nginx's sticky balancers do: "stay" retries the endpoint the client's cookie names
(session-cookie-change-on-failure false, the default); otherwise it holds the mode's letter and the request's
cookie line with a tab where the key goes, and move() takes another endpoint and re-issues the cookie for it
(change-on-failure true, or a session that had no cookie yet).
]]
local cjson = require("cjson.safe")
local hashing = require("pyngress.hashing")

local md5, http_time, time = ngx.md5, ngx.http_time, ngx.time
local concat, random, match, find, sub = table.concat, math.random, string.match, string.find, string.sub

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
        change_on_failure = raw.change_on_failure == true,
        balanced = raw.mode ~= "persistent",
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

local function endpoint_hash(peer)
    return md5(peer[3])
end

-- peers table (from the backends table) -> { [endpoint_hash] = index }, built once per table.
local by_hash = setmetatable({}, { __mode = "k" })

local function hashes(peers)
    local found = by_hash[peers]
    if not found then
        found = {}
        for i = 1, #peers do
            found[endpoint_hash(peers[i])] = i
        end
        by_hash[peers] = found
    end
    return found
end

-- The Set-Cookie line of `affinity` for the endpoint hash `value` (a tab: filled in later by fill()).
local function cookie_line(affinity, value)
    local parts = { affinity.name .. "=" .. value, "Path=" .. affinity.path, "HttpOnly" }
    if affinity.max_age then
        parts[#parts + 1] = "Max-Age=" .. affinity.max_age
    end
    if affinity.expires then
        parts[#parts + 1] = "Expires=" .. http_time(time() + affinity.expires)
    end
    if affinity.secure or ngx.var.https == "on" then
        parts[#parts + 1] = "Secure"
    end
    if affinity.domain then
        parts[#parts + 1] = "Domain=" .. affinity.domain
    end
    if affinity.samesite and not (affinity.samesite == "None" and affinity.conditional_samesite_none
                                  and samesite_none_incompatible()) then
        parts[#parts + 1] = "SameSite=" .. affinity.samesite
    end
    return concat(parts, "; ")
end

-- Set the cookie of a cookie_line() `template` to hold `key`.
local function fill(template, key)
    local tab = find(template, "\t", 1, true)
    ngx.header["Set-Cookie"] = sub(template, 1, tab - 1) .. key .. sub(template, tab + 1)
end

-- A new random key of a balanced session ($request_id: 32 random hex digits nginx makes per request).
local function new_key(suffix)
    return md5(ngx.var.request_id .. suffix)
end

-- The backend key in the request's cookie (md5 of the backend's name), or nil.
function _M.backend_of(affinity)
    return match(ngx.var[affinity.var] or "", "|(%x+)$")
end

function _M.backend_key(name)
    return name and md5(name) or nil
end

-- The index of this request's endpoint among the `peers` of `backend` (the router hands it to the balancer);
-- what to do if it fails goes to the balancer through $pyngress_affinity.
function _M.pick(affinity, peers, backend)
    local var = ngx.var
    local key = match(var[affinity.var] or "", "^%x+")
    local index
    if affinity.balanced then
        index = key and #key == 32 and hashing.rendezvous(key, peers)
    else
        index = key and hashes(peers)[key]
    end
    if index and not affinity.change_on_failure then
        var.pyngress_affinity = "stay"
    else
        local template = cookie_line(affinity, "\t|" .. md5(backend))
        var.pyngress_affinity = (affinity.balanced and "b" or "p") .. template
        if not index then
            if affinity.balanced then
                key = new_key("")
                index = hashing.rendezvous(key, peers)
            else
                index = random(#peers)
                key = endpoint_hash(peers[index])
            end
            fill(template, key)
        end
    end
    return index
end

-- In the balancer, after the endpoint at `failed` failed: the index of another endpoint of `peers` for the
-- session pick() described in `session`, whose cookie now names it.
function _M.move(session, peers, failed)
    local template = sub(session, 2)
    if sub(session, 1, 1) == "b" then
        -- A key that picks another endpoint (with n endpoints, n tries on average; 20 as ingress-nginx).
        for attempt = 1, 20 do
            local key = new_key(attempt)
            local index = hashing.rendezvous(key, peers)
            if index ~= failed then
                fill(template, key)
                return index
            end
        end
        return failed
    end
    local index = failed % #peers + 1
    fill(template, endpoint_hash(peers[index]))
    return index
end

return _M
