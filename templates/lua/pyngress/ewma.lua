--[[
load-balance: ewma (ingress-nginx's latency-aware balancing): each worker keeps, per endpoint, an exponentially
weighted moving average of its connect + response time that decays with a 10 s time constant; a request takes
the better of two endpoints picked at random ("power of two choices"), so slow endpoints get little traffic
without starving, and an endpoint never measured (new, or idle for long) is tried.
]]
local exp, random, tonumber, match, gmatch = math.exp, math.random, tonumber, string.match, string.gmatch

local DECAY_SECONDS = 10

local _M = {}

local stats = {}  -- "ip:port" -> { ewma = seconds, at = ngx.now() of the last measure }
-- Whether this worker has balanced a request by ewma: until then record() does not look at ngx.ctx, which it
-- would make for every request (the balancer makes it only for the requests that need it).
local picked = false

local function score(peer, now)
    local entry = stats[peer[3]]
    if not entry then
        return 0
    end
    return entry.ewma * exp((entry.at - now) / DECAY_SECONDS)
end

-- The index of this request's endpoint among `peers`, negative: the balancer marks the request (ngx.ctx, which the
-- jump to the named location clears) for record().
function _M.pick(peers)
    local count = #peers
    local chosen = 1
    if count > 1 then
        local a = random(count)
        local b = random(count - 1)
        if b >= a then
            b = b + 1
        end
        local now = ngx.now()
        chosen = score(peers[b], now) < score(peers[a], now) and b or a
    end
    picked = true
    return -chosen
end

-- In the log phase of a request _M.pick balanced: fold each endpoint's time into its average (a retried
-- request lists every endpoint it tried).
function _M.record()
    if not picked or not ngx.ctx.pyngress_ewma then
        return
    end
    local var = ngx.var
    local addresses, connects, responses = var.upstream_addr, var.upstream_connect_time, var.upstream_response_time
    if not addresses or not responses then
        return
    end
    local connect_times = {}
    for value in gmatch(connects or "", "[^,%s]+") do
        connect_times[#connect_times + 1] = tonumber(value) or 0
    end
    local now, i = ngx.now(), 0
    local response_of = gmatch(responses, "[^,%s]+")
    for address in gmatch(addresses, "[^,%s]+") do
        i = i + 1
        local seconds = tonumber(response_of() or "") or 0
        seconds = seconds + (connect_times[i] or 0)
        if match(address, ":%d+$") then
            local entry = stats[address]
            if entry then
                local weight = exp((entry.at - now) / DECAY_SECONDS)
                entry.ewma, entry.at = entry.ewma * weight + seconds * (1 - weight), now
            else
                stats[address] = { ewma = seconds, at = now }
            end
        end
    end
end

return _M
