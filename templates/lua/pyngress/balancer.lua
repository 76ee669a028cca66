--[[
Picks the upstream peer (balancer_by_lua in `upstream upstream_balancer`) for the requests the router does not hand to
pyngress's nginx module (nginx-module/pyngress_balancer.c): those a session affinity keeps, an HTTPRoute rule's retry
budget, the error pages, the auth-keepalive and mirror upstreams.

The backends table (POST /configuration/backends): {"<backend name>": ["<ip>:<port>", ...]}, IPv6 as
"[::1]:80". Round robin per worker over a backend's endpoints; after a failed connection (proxy_next_upstream
error timeout) the next endpoint, each at most once per request (up to proxy_next_upstream_tries), except for
a session affinity.lua keeps on its endpoint.
]]
local balancer = require("ngx.balancer")
local store = require("pyngress.store")
local affinity = require("pyngress.affinity")
local ewma = require("pyngress.ewma")
local native = require("pyngress.native")
local gateway_budget = require("pyngress.gateway_budget")

local match, gmatch, random = string.match, string.gmatch, math.random
local byte, find, sub = string.byte, string.find, string.sub
local HASH, BUDGET = byte("#"), byte("!")

local _M = {}

-- "10.0.0.1:8080" or "[fd00::1]:8080" -> {address, port, text}; set_current_peer takes IPv6 in brackets, and
-- `text` ("address:port") is how $upstream_addr names the endpoint and what ewma, hashing and affinity key it by.
local function endpoint_of(text, name)
    local address, port = match(type(text) == "string" and text or "", "^([%x.:%[%]]+):(%d+)$")
    port = tonumber(port)
    local ipv4 = address and match(address, "^[%d.]+$")
    local ipv6 = address and match(address, "^%[[%x:.]+%]$")
    if not (ipv4 or ipv6) or port < 1 or port > 65535 then
        error(name .. ": endpoint " .. tostring(text) .. " is not <ip>:<port> or [<ipv6>]:<port>", 0)
    end
    return { address, port, address .. ":" .. port }
end

-- One backend's entry of the backends table: its endpoints, and the same as the module's peers object (`native`),
-- which the router hands to the module's balancer.
local function entry_of(name, endpoints)
    if type(endpoints) ~= "table" then
        error("backend " .. name .. " must map to a list of endpoints", 0)
    end
    local peers = {}
    for i, text in ipairs(endpoints) do
        peers[i] = endpoint_of(text, name)
    end
    peers.native = native.peers_of(peers)
    return peers
end

store.define("backends", { entry = entry_of })

-- Endpoint list -> index of the endpoint this worker used last. Weak: a list the backends table no longer holds
-- (its backend changed or went) takes its cursor with it.
local cursors = setmetatable({}, { __mode = "k" })

-- The backend of `fixed` (an upstream of its own always uses it: auth-keepalive's), else the router's choice in
-- $pg_bal: "<backend>", or "#<index> <backend>" when the router chose the endpoint too (affinity.lua,
-- hashing.lua, ewma.lua), or "!<budget> <backend>" for an HTTPRoute rule's retry and timeouts (gateway_budget.lua,
-- its state the third value); one variable, because each read by name costs the balancer about 500 instructions.
local function choice(fixed)
    if fixed then
        return fixed, nil
    end
    local chosen = ngx.var.pg_bal
    local first = byte(chosen, 1)
    if first == BUDGET then
        local backend, budget = gateway_budget.parse(chosen)
        return backend, nil, budget
    elseif first ~= HASH then
        return chosen, nil
    end
    local space = find(chosen, " ", 3, true)
    return sub(chosen, space + 1), tonumber(sub(chosen, 2, space - 1))
end

-- The endpoints of backend `name`.
local function peers_of(name)
    local peers = store.current("backends")[name]
    if not peers or #peers == 0 then
        -- The router answers 503 for this; only a push between the two phases gets here.
        ngx.log(ngx.ERR, "backend ", name, " has no endpoints")
        return nil
    end
    return peers
end

-- The place in `peers` of the endpoint this request tried last: $upstream_addr lists the endpoints tried ("a, b"),
-- and " : " for the try under way.
local function last_tried(peers)
    local last
    for address in gmatch(ngx.var.upstream_addr or "", "[^,%s]+") do
        if address ~= ":" then
            last = address
        end
    end
    for i = 1, #peers do
        if peers[i][3] == last then
            return i
        end
    end
    return nil
end

-- A retry after proxy_next_upstream: the next endpoint (each once per request), unless affinity keeps the session
-- where it is. Only retries and the routes that chose an endpoint in the router (affinity, hashing, ewma) keep their
-- state in ngx.ctx: making it costs every request that has it more than the rest of the balancer.
local function next_index(fixed, ctx)
    local peers = ctx.pyngress_peers
    if not peers then
        -- Round robin's first try kept nothing: the endpoint after the one it tried.
        peers = peers_of((choice(fixed)))
        if not peers then
            return nil
        end
        ctx.pyngress_peers = peers
        return peers, (last_tried(peers) or random(#peers)) % #peers + 1
    end
    local session = ctx.pyngress_affinity
    if session == "stay" then
        return peers, ctx.pyngress_index
    elseif session then
        return peers, affinity.move(session, peers, ctx.pyngress_index)  -- the session moves, and its cookie
    end
    return peers, ctx.pyngress_index % #peers + 1
end

-- The first try: the endpoint the router chose (affinity.lua, hashing.lua, ewma.lua), else the next in this
-- worker's round robin.
local function first_index(fixed)
    local name, index, budget = choice(fixed)
    local peers = peers_of(name)
    if not peers then
        return nil
    end
    if index then
        local ctx = ngx.ctx
        if index < 0 then
            index = -index  -- ewma.lua's choice: the request's endpoints are measured in its log phase
            ewma.measure()
        else
            local session = ngx.var.pyngress_affinity
            ctx.pyngress_affinity = session ~= "" and session or nil
        end
        if peers[index] then
            ctx.pyngress_peers, ctx.pyngress_index = peers, index
        else
            index = nil
        end
    end
    if not index then
        index = (cursors[peers] or random(#peers)) % #peers + 1
        cursors[peers] = index
    end
    if budget then
        ngx.ctx.pyngress_budget = budget  -- its retries and deadline, for each attempt
        gateway_budget.spend(budget)
    elseif #peers > 1 then
        balancer.set_more_tries(#peers - 1)
    end
    return peers, index
end

function _M.balance(fixed)
    local peers, index
    if balancer.get_last_failure() then
        local ctx = ngx.ctx
        peers, index = next_index(fixed, ctx)
        ctx.pyngress_index = index
        if ctx.pyngress_budget and not gateway_budget.spend(ctx.pyngress_budget) then
            return ngx.exit(500)
        end
    else
        peers, index = first_index(fixed)
    end
    if not peers then
        return ngx.exit(500)
    end
    local peer = peers[index]
    local ok, err = balancer.set_current_peer(peer[1], peer[2])
    if not ok then
        ngx.log(ngx.ERR, "cannot use endpoint ", peer[3], ": ", err)
        return ngx.exit(500)
    end
end

return _M
