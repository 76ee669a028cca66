--[[
load-balance: ewma (ingress-nginx's latency-aware balancing): each worker keeps, per endpoint, an exponentially
weighted moving average of its connect + response time that decays with a 10 s time constant; a request takes
the better of two endpoints picked at random ("power of two choices"), so slow endpoints get little traffic
without starving, and an endpoint never measured (new, or idle for long) is tried.
]]
local ffi = require("ffi")
local base = require("resty.core.base")

local random, now = math.random, ngx.now
local get_request = base.get_request

-- The measures live in pyngress's nginx module (nginx-module/), which takes them in the log phase: a request then
-- needs no Lua there.
ffi.cdef([[
int ngx_http_pyngress_ewma_measure(void *r);
double ngx_http_pyngress_ewma_score(const char *name, size_t len, double now);
]])
local module = ffi.C

local _M = {}

-- An endpoint's average now (0: never measured by this worker, so it is tried).
local function score(peer, at)
    local name = peer[3]
    return module.ngx_http_pyngress_ewma_score(name, #name, at)
end

-- The index of this request's endpoint among `peers`, negative: the balancer has the module measure the request
-- (measure()) once it knows which endpoint it tries.
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
    if module.ngx_http_pyngress_ewma_measure(get_request()) ~= 0 then
        ngx.log(ngx.ERR, "load-balance ewma: no memory to measure this request")
    end
end

return _M
