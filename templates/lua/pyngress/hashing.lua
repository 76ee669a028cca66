--[[
upstream-hash-by (services/syncer/annotations/balancing.py): the route's key of nginx variables picks the
endpoint by rendezvous hashing: the peer with the highest CRC32 of key and peer wins, so a key keeps its
endpoint while it exists, and when endpoints come or go only the keys of those endpoints move.
]]
local crc32 = ngx.crc32_long
local gsub = string.gsub

local _M = {}

-- The key's value for this request: each $name replaced by ngx.var[name] ("" when unset).
local function key_of(template)
    local var = ngx.var
    return (gsub(template, "%$([%w_]+)", function(name)
        return var[name] or ""
    end))
end

-- Choose the endpoint of this request among `peers`; its index goes to the balancer through $pyngress_peer.
function _M.pick(template, peers)
    local key = key_of(template)
    local best, best_score = 1, -1
    for i = 1, #peers do
        local score = crc32(key .. "\0" .. peers[i][1] .. ":" .. peers[i][2])
        if score > best_score then
            best, best_score = i, score
        end
    end
    ngx.var.pyngress_peer = best
end

return _M
