--[[
Per-request metrics (services/nginxconf/request_metrics.py describes the batch format).

record() runs in the log phase of every request on the public server. It only counts the request's
$pg_obs line (status, method, observed values, labels) in a table keyed by the line: under load most
requests repeat a line seen shortly before (times are in milliseconds), so record() costs one variable read and one
table update. count() parses each distinct line once, folding it into this worker's counts keyed by labels, when
BATCH_LINES distinct lines wait and before each flush. Once a second (and when the worker exits) the counts go to
the pyngress_metrics shared dictionary as one JSON batch; the syncer pops the batches (take()). When the
dictionary is full (nobody collected for a long time) the worker keeps adding to its counts and tries again a
second later: totals are never lost, they only arrive later.

count_line() folds every method outside request_metrics.py's KNOWN_METHODS into one value: it runs once per distinct
line, not per request, so the bound costs record() nothing.

The router sets $pyngress_metric to the labels of the route (host, namespace, ingress, service, path, canary;
labels_of() makes them); it stays empty when no Ingress defines the request's host.
]]
local cjson = require("cjson.safe")
local settings = require("pyngress.settings")

local tonumber, concat, gsub, find, sub, byte = tonumber, table.concat, string.gsub, string.find, string.sub, string.byte
local new_table = require("table.new")
local clear_table = require("table.clear")

local EMPTY_LABELS = "\t\t\t\t\t"  -- after the host: no namespace, ingress, service, path or canary
local PIPE = byte("|")
local QUEUE = "batches"
local FLUSH_SECONDS = 1
local MAX_HOST_LENGTH = 253
local BATCH_LINES = 512  -- bounds the distinct lines kept between two counts (about 100 KiB)

local _M = {}

local pending = {}   -- this worker's counts since its last batch (numbers_for)
local pending_count = 0
local lines = new_table(0, BATCH_LINES)  -- $pg_obs -> how many requests not counted yet sent it
local line_count = 0  -- distinct lines in `lines`
local observed = {}  -- one line's value of each observed variable (false: none)

-- The numbers of one labels key, all zero (layout in request_metrics.py).
local function new_numbers(width)
    local numbers = new_table(width, 0)
    for i = 1, width do
        numbers[i] = 0
    end
    return numbers
end

-- This worker's counts since its last batch: labels -> status -> method -> numbers (nested, so that a request
-- builds no key string; flush() joins them once a second).
local function numbers_for(labels, status, method, width)
    local by_status = pending[labels]
    if not by_status then
        by_status = {}
        pending[labels] = by_status
    end
    local by_method = by_status[status]
    if not by_method then
        by_method = {}
        by_status[status] = by_method
    end
    local numbers = by_method[method]
    if not numbers then
        numbers = new_numbers(width)
        by_method[method] = numbers
        pending_count = pending_count + 1
    end
    return numbers
end

-- Adds `requests` requests of one line ("<status>|<method>|<value>|...|<labels>") to the counts.
local function count_line(config, line, requests)
    local stop = find(line, "|", 1, true)
    local status = sub(line, 1, stop - 1)
    local start = stop + 1
    stop = find(line, "|", start, true)
    local method = sub(line, start, stop - 1)
    if not config.methods[method] then
        -- nginx takes any upper-case token as a method: made-up ones are one series, and never leave the worker.
        method = config.other_method
    end
    start = stop + 1
    for v = 1, config.read_count do
        stop = find(line, "|", start, true)
        -- A retried request has "0.001, 0.002": not a number, not observed (as in ingress-nginx).
        observed[v] = tonumber(sub(line, start, stop - 1)) or false
        start = stop + 1
    end
    local labels = sub(line, start)
    if labels == "" then
        if config.per_host then
            return  -- a host no Ingress defines (ingress-nginx's --metrics-per-undefined-host)
        end
        labels = EMPTY_LABELS  -- the collector drops the host label
    end
    local numbers = numbers_for(labels, status, method, config.width)
    numbers[1] = numbers[1] + requests
    local histograms = config.histograms
    for h = 1, #histograms do
        local histogram = histograms[h]
        local value = observed[histogram.variable_index]
        if value then
            local bounds, base = histogram.buckets, histogram.offset
            local slot, last = 1, #bounds
            while slot <= last and value > bounds[slot] do
                slot = slot + 1
            end
            numbers[base + slot] = numbers[base + slot] + requests
            numbers[base + last + 2] = numbers[base + last + 2] + value * requests
        end
    end
end

-- Folds the kept lines into the counts.
local function count()
    local config = settings.metrics
    for line, requests in pairs(lines) do
        count_line(config, line, requests)
    end
    clear_table(lines)
    line_count = 0
end

function _M.record()
    local config = settings.metrics
    if not config then
        return
    end
    local line = ngx.var.pg_obs
    if config.per_undefined_host and byte(line, -1) == PIPE then
        -- No labels: a host no Ingress defines, counted under its name (--metrics-per-undefined-host).
        -- Cut to a DNS name's longest: the label is the client's, its length must not be (the collector bounds how
        -- many such hosts it keeps).
        line = line .. gsub(sub(ngx.var.host or "", 1, MAX_HOST_LENGTH), "[\t\n]", " ") .. EMPTY_LABELS
    end
    local requests = lines[line]
    if requests then
        lines[line] = requests + 1
        return
    end
    lines[line] = 1
    line_count = line_count + 1
    if line_count >= BATCH_LINES then
        count()
    end
end

local function flush()
    count()
    if pending_count == 0 then
        return
    end
    local batch = {}
    for labels, by_status in pairs(pending) do
        for status, by_method in pairs(by_status) do
            for method, numbers in pairs(by_method) do
                batch[labels .. "\t" .. status .. "\t" .. method] = numbers
            end
        end
    end
    local ok, err = ngx.shared.pyngress_metrics:rpush(QUEUE, cjson.encode(batch))
    if not ok then
        ngx.log(ngx.WARN, "request metrics kept in the worker until the syncer collects them: ", err)
        return
    end
    clear_table(pending)
    pending_count = 0
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

-- settings.metrics from the rendered layout: each histogram's offset into a key's numbers, and where count_line()
-- finds its value (the place of its variable in $pg_obs, after the status and the method).
function _M.configure(values)
    if not values then
        return nil
    end
    local index_of = {}
    for i, name in ipairs(values.read_variables) do
        index_of[name] = i
    end
    local offset = 1  -- numbers[1] is the request count
    for _, histogram in ipairs(values.histograms) do
        histogram.offset = offset
        offset = offset + #histogram.buckets + 2
        histogram.variable_index = assert(index_of[histogram.variable], histogram.variable)
    end
    local methods = {}  -- the methods counted under their own name (KNOWN_METHODS), as a set
    for _, name in ipairs(values.methods) do
        methods[name] = true
    end
    values.methods = methods
    values.read_count = #values.read_variables
    values.width = offset
    return values
end

return _M
