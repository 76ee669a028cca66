--[[
upstream-hash-by (services/syncer/annotations/balancing.py): the route's key of nginx variables picks the
endpoint by rendezvous hashing: the peer with the highest CRC32 of key and peer wins, so a key keeps its
endpoint while it exists, and when endpoints come or go only the keys of those endpoints move.

With upstream-hash-by-subset (a subset size), as ingress-nginx: the endpoints, in the table's order, make
ceil(n / size) subsets of `size` (the last one filled up with the first endpoints again); the key picks a
subset the same way, and a random endpoint of it serves the request.
]]
local crc32 = ngx.crc32_long
local gsub = string.gsub
local ceil, random = math.ceil, math.random

local _M = {}

-- The key's value for this request: each $name replaced by ngx.var[name] ("" when unset).
local function key_of(template)
    local var = ngx.var
    return (gsub(template, "%$([%w_]+)", function(name)
        return var[name] or ""
    end))
end

-- The index of this request's endpoint among `peers` (with `subset_size`, within the subset the key picks).
function _M.pick(template, peers, subset_size)
    local key = key_of(template)
    local count = #peers
    if subset_size and count > subset_size then
        local subsets = ceil(count / subset_size)
        local best, best_score = 1, -1
        for i = 1, subsets do
            local score = crc32(key .. "\0set" .. i)
            if score > best_score then
                best, best_score = i, score
            end
        end
        -- The subset's members, by position: the last subset wraps around to the first endpoints.
        return ((best - 1) * subset_size + random(subset_size) - 1) % count + 1
    end
    return _M.rendezvous(key, peers)
end

-- The index of the peer that `key` picks: the highest CRC32 of key and peer (also affinity.lua's, balanced).
function _M.rendezvous(key, peers)
    local best, best_score = 1, -1
    for i = 1, #peers do
        local score = crc32(key .. "\0" .. peers[i][3])
        if score > best_score then
            best, best_score = i, score
        end
    end
    return best
end

return _M
