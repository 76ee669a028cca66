--[[
load-balance: ewma (ingress-nginx's latency-aware balancing): each worker keeps, per endpoint, an exponentially
weighted moving average of its connect + response time that decays with a 10 s time constant; a request takes
the better of two endpoints picked at random ("power of two choices"), so slow endpoints get little traffic
without starving, and an endpoint never measured (new, or idle for long) is tried.
]]
local native = require("pyngress.native")

local random, now = math.random, ngx.now
-- The measures live in pyngress's nginx module (nginx-module/pyngress_ewma.c), which takes them in the log phase: a
-- request then needs no Lua there.
local module = native.C

local _M = {}

-- An endpoint's average now (0: never measured by this worker, so it is tried).
local function score(peer, at)
    local name = peer[3]
    return module.ngx_http_pyngress_ewma_score(name, #name, at)
end

-- The index of this request's endpoint among `peers`, negative: the module's balancer (or balancer.lua, with
-- measure()) has the request measured.
function _M.pick(peers)
    local count = #peers
    local chosen = 1
    if count > 1 then
        local a = random(count)
        local b = random(count - 1)
        if b >= a then
            b = b + 1
        end
        local at = now()
        chosen = score(peers[b], at) < score(peers[a], at) and b or a
    end
    return -chosen
end

-- In the balancer, for a request _M.pick balanced: its log phase folds each endpoint's time (a retried request
-- tried several) into that endpoint's average.
function _M.measure()
    if not native.measure_ewma() then
        ngx.log(ngx.ERR, "load-balance ewma: no memory to measure this request")
    end
end

return _M
