--[[
Picks the upstream peer for every proxied request (balancer_by_lua in `upstream upstream_balancer`).

The backends table (POST /configuration/backends): {"<backend name>": ["<ip>:<port>", ...]}, IPv6 as
"[::1]:80". Round robin per worker over a backend's endpoints; after a failed connection (proxy_next_upstream
error timeout) the next endpoint, each at most once per request (up to proxy_next_upstream_tries), except for
a session affinity.lua keeps on its endpoint.
]]
local balancer = require("ngx.balancer")
local store = require("pyngress.store")
local affinity = require("pyngress.affinity")

local match, random = string.match, math.random

local _M = {}

-- "10.0.0.1:8080" or "[fd00::1]:8080" -> {address, port}; set_current_peer takes IPv6 in brackets.
local function endpoint_of(text, name)
    local address, port = match(type(text) == "string" and text or "", "^([%x.:%[%]]+):(%d+)$")
    port = tonumber(port)
    local ipv4 = address and match(address, "^[%d.]+$")
    local ipv6 = address and match(address, "^%[[%x:.]+%]$")
    if not (ipv4 or ipv6) or port < 1 or port > 65535 then
        error(name .. ": endpoint " .. tostring(text) .. " is not <ip>:<port> or [<ipv6>]:<port>", 0)
    end
    return { address, port }
end

-- One backend's entry of the backends table: its endpoints.
local function entry_of(name, endpoints)
    if type(endpoints) ~= "table" then
        error("backend " .. name .. " must map to a list of endpoints", 0)
    end
    local peers = {}
    for i, text in ipairs(endpoints) do
        peers[i] = endpoint_of(text, name)
    end
    return peers
end

store.define("backends", { entry = entry_of })

-- Endpoint list -> index of the endpoint this worker used last. Weak: a list the backends table no longer holds
-- (its backend changed or went) takes its cursor with it.
local cursors = setmetatable({}, { __mode = "k" })

-- `fixed`: the backend an upstream of its own always uses (auth-keepalive's); else the router's choice.
function _M.balance(fixed)
    local ctx = ngx.ctx
    local peers = ctx.pyngress_peers
    local index
    if peers then
        -- A retry after proxy_next_upstream: the next endpoint, unless affinity keeps the session where it is.
        local session = ctx.pyngress_affinity
        if session == "stay" then
            index = ctx.pyngress_index
        elseif session then
            index = affinity.move(session, peers, ctx.pyngress_index)  -- the session moves, and its cookie
        else
            index = ctx.pyngress_index % #peers + 1
        end
    else
        local var = ngx.var
        local name = fixed
        if not name then
            name = var.proxy_alternative_upstream_name  -- the canary, when the router chose it
            if name == "" then
                name = var.proxy_upstream_name
            end
        end
        peers = store.current("backends")[name]
        if not peers or #peers == 0 then
            -- The router answers 503 for this; only a push between the two phases gets here.
            ngx.log(ngx.ERR, "backend ", name, " has no endpoints")
            return ngx.exit(500)
        end
        -- affinity.lua's choice for this request, if any; else round robin.
        index = not fixed and tonumber(var.pyngress_peer)
        if index and index < 0 then
            index = -index  -- ewma.lua's choice: its record() measures this request's endpoint
            ctx.pyngress_ewma = true
        elseif index then
            local session = var.pyngress_affinity
            ctx.pyngress_affinity = session ~= "" and session or nil
        end
        if not index or not peers[index] then
            index = (cursors[peers] or random(#peers)) % #peers + 1
            cursors[peers] = index
        end
        ctx.pyngress_peers = peers
        if #peers > 1 then
            balancer.set_more_tries(#peers - 1)
        end
    end
    ctx.pyngress_index = index
    local peer = peers[index]
    local ok, err = balancer.set_current_peer(peer[1], peer[2])
    if not ok then
        ngx.log(ngx.ERR, "cannot use endpoint ", peer[1], ":", peer[2], ": ", err)
        return ngx.exit(500)
    end
end

return _M
