--[[
Hands this worker's per-request metrics to the syncer (services/nginxconf/request_metrics.py describes the batch).

pyngress's nginx module (nginx-module/) counts every request of the public server in the log phase, keyed by the
route's metric labels, which the router sets in $pyngress_metric (labels_of() makes them; empty when no Ingress
defines the request's host). Once a second (and when the worker exits) flush() takes the module's counts as one JSON
batch into the pyngress_metrics shared dictionary; the syncer pops the batches (take()). When the dictionary is full
(nobody collected for a long time) the module keeps counting and the next batch carries everything: totals are
never lost, they only arrive later.
]]
local ffi = require("ffi")
local native = require("pyngress.native")
local settings = require("pyngress.settings")

local concat, gsub, find, sub = table.concat, string.gsub, string.find, string.sub

local module = native.C

local EMPTY_LABELS = "\t\t\t\t\t"  -- after the host: no namespace, ingress, service, path or canary
local QUEUE = "batches"
local FLUSH_SECONDS = 1

local _M = {}

local batch_text = ffi.new("unsigned char *[1]")

local function flush()
    local length = tonumber(module.ngx_http_pyngress_metrics_batch(batch_text))
    if length == 0 then
        return
    end
    local ok, err = ngx.shared.pyngress_metrics:rpush(QUEUE, ffi.string(batch_text[0], length))
    if not ok then
        ngx.log(ngx.WARN, "request metrics kept in the worker until the syncer collects them: ", err)
        return
    end
    module.ngx_http_pyngress_metrics_clear()
end

-- init_worker: the batch timer; it also runs when the worker exits (premature), so a reload loses nothing.
function _M.start()
    if not settings.metrics then
        return
    end
    local ok, err = ngx.timer.every(FLUSH_SECONDS, flush)
    if not ok then
        ngx.log(ngx.ERR, "no request metrics from this worker: cannot start its timer: ", err)
    end
end

-- The batches waiting for the syncer, as one JSON array; each is returned once.
function _M.take()
    local dict = ngx.shared.pyngress_metrics
    if not dict then
        return "[]"  -- this nginx.conf records no metrics (--enable-metrics=false, or not loaded yet)
    end
    local batches = {}
    while true do
        local batch = dict:lpop(QUEUE)
        if not batch then
            break
        end
        batches[#batches + 1] = batch
    end
    return "[" .. concat(batches, ",") .. "]"
end

-- The labels of a route ("namespace/name" of its Ingress); a path may hold anything but a tab or newline.
-- (string.find and string.sub rather than patterns: LuaJIT compiles them, and a whole routes table builds one per
-- route in every push.)
function _M.labels_of(host, ingress, service, path, canary)
    local slash = ingress and find(ingress, "/", 1, true)
    local namespace = slash and sub(ingress, 1, slash - 1) or ""
    local name = slash and sub(ingress, slash + 1) or ""
    if find(path, "\t", 1, true) or find(path, "\n", 1, true) then
        path = gsub(path, "[\t\n]", " ")
    end
    return host .. "\t" .. namespace .. "\t" .. name .. "\t" .. (service or "") .. "\t" .. path .. "\t" .. (canary or "")
end

-- The labels of a request on a host an Ingress defines that no route of it takes (the default backend).
function _M.host_labels(host)
    return host .. EMPTY_LABELS
end

return _M
