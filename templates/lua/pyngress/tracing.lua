--[[
OpenTelemetry tracing in nginx's Lua (services/nginxconf/tracing.py describes the settings and the batch format; the
tracer process exports the spans over OTLP).

start() runs in the router once the request's route is known. On a traced route it continues the client's W3C
traceparent when the route trusts incoming spans (opentelemetry-trust-incoming-span, true by default as in
ingress-nginx) and the header is valid, else it starts a new trace; it draws the span id, decides sampling (the root
sampler, or a trusted parent's decision with otel-sampler-parent-based), and replaces the traceparent the backend
gets with one naming this request's span ($pyngress_traceparent, which nginx.conf's profile locations send). The
client's tracestate goes on only with the parent it belongs to. A sampled request leaves its ids and name in
$pyngress_trace (variables: ngx.ctx does not survive the router's jump to the named location).

record() runs in the log phase: for a sampled request it appends one span (a few variable reads, one small table) to
this worker's buffer. Every SPANS_PER_BATCH spans, and once a second, the buffer goes to the pyngress_spans shared
dictionary as one JSON batch; the tracer takes the batches (take()). Nothing waits for the tracer: a full dictionary
(the tracer is down or slow) drops the batch, and the drop is counted for the tracer to report.

Ids come from request_id.lua (OpenSSL's random bytes, drawn in bulk per worker): a trace id is one request id, a span
id the first half of another.
]]
local cjson = require("cjson.safe")
local settings = require("pyngress.settings")
local request_id = require("pyngress.request_id")

local sub, byte, match, rep, concat = string.sub, string.byte, string.match, string.rep, table.concat
local new_table = require("table.new")
local clear_table = require("table.clear")

local ZERO_TRACE = rep("0", 32)
local ZERO_SPAN = rep("0", 16)
local HEX2 = "[0-9a-f][0-9a-f]"
-- version-traceid-parentid-flags, lowercase hex (W3C Trace Context, level 1).
local TRACEPARENT = "^(" .. HEX2 .. ")%-(" .. rep("[0-9a-f]", 32) .. ")%-(" .. rep("[0-9a-f]", 16) .. ")%-(" .. HEX2 .. ")"
local VERSION_00_LENGTH = 55
local DASH = byte("-")
local SPANS_PER_BATCH = 128  -- a batch is about 50 KB of JSON
local FLUSH_SECONDS = 1
local TAKE_BATCHES = 64  -- per answer to the tracer: it asks again while "more" is true
local QUEUE = "batches"
local DROPPED = "dropped"

local _M = {}

local buffer = new_table(SPANS_PER_BATCH, 0)
local buffered = 0
local dropped = 0  -- spans this worker dropped that the dictionary does not count yet
-- Sampled requests of this worker not recorded yet: while none is, record() reads no variable (most requests at a
-- low ratio). Never below the requests in flight that were sampled, so no span is missed.
local unrecorded = 0

-- The trace id, parent span id and whether the parent was sampled, of a valid traceparent header; nil otherwise.
local function parent_of(header)
    if type(header) ~= "string" then
        return nil
    end
    local version, trace_id, parent, flags = match(header, TRACEPARENT)
    if not version or version == "ff" or trace_id == ZERO_TRACE or parent == ZERO_SPAN then
        return nil
    end
    -- Version 00 is exactly 55 characters; a later version may add fields after a "-".
    if #header ~= VERSION_00_LENGTH and (version == "00" or byte(header, VERSION_00_LENGTH + 1) ~= DASH) then
        return nil
    end
    return trace_id, parent, tonumber(flags, 16) % 2 == 1
end

local function root_samples(config, trace_id)
    local sampler = config.sampler
    if sampler == "on" then
        return true
    elseif sampler == "off" then
        return false
    end
    -- TraceIdRatioBased: the low 64 bits of the id below the bound; same-length lowercase hex compares as numbers.
    return sub(trace_id, 17) < config.ratio_bound
end

-- ConfigMap opentelemetry-operation-name: literal text and nginx variables (tracing.py, operation_parts).
local function operation_name(parts)
    local var = ngx.var
    local name = parts[1]
    for i = 2, #parts, 2 do
        name = name .. (var[parts[i]] or "") .. parts[i + 1]
    end
    return name
end

-- A route's own tracing (the enable-opentelemetry, opentelemetry-trust-incoming-span and
-- opentelemetry-operation-name annotations), from its routes table entry; nil: the ConfigMap's applies.
function _M.route_config(raw)
    if type(raw.otel_enabled) ~= "boolean" then
        return nil
    end
    local trust = raw.otel_trust
    if type(trust) ~= "boolean" then
        trust = nil  -- the ConfigMap's opentelemetry-trust-incoming-span
    end
    return { enabled = raw.otel_enabled, trust = trust,
             name = type(raw.otel_name) == "string" and raw.otel_name or nil }
end

-- The router's call for a request of `route` (nil: no route takes it); `path` is the route's Ingress path.
function _M.start(route, path)
    local config = settings.tracing
    local enabled, trust, name = config.enabled, config.trust, nil
    local own = route and route.trace
    if own then
        enabled, name = own.enabled, own.name
        if own.trust ~= nil then
            trust = own.trust
        end
    end
    if not enabled then
        return
    end
    local var = ngx.var
    if var.pyngress_traceparent ~= "" then
        return  -- started already: the request waited for a push and is routed again
    end
    local trace_id, parent, parent_sampled
    if trust then
        trace_id, parent, parent_sampled = parent_of(var.http_traceparent)
    end
    if parent then
        -- The parent's vendor state goes on with it; a new trace sends none (nginx.conf's $pyngress_tracestate_out).
        local state = var.http_tracestate
        if state then
            var.pyngress_tracestate = state
        end
    else
        trace_id = request_id.new()
    end
    local span_id = request_id.new()
    if not trace_id or not span_id then
        return  -- OpenSSL had no random bytes: the request goes on untraced
    end
    span_id = sub(span_id, 1, 16)
    local sampled
    if parent and config.parent_based then
        sampled = parent_sampled
    else
        sampled = root_samples(config, trace_id)
    end
    var.pyngress_traceparent = "00-" .. trace_id .. "-" .. span_id .. (sampled and "-01" or "-00")
    if sampled then
        unrecorded = unrecorded + 1
        if not name then
            name = config.operation and operation_name(config.operation) or path or "/"
        end
        var.pyngress_trace = trace_id .. span_id .. (parent or ZERO_SPAN) .. name
    end
end

-- Hands this worker's spans to the dictionary as one batch; a full dictionary drops them (counted).
local function push()
    if buffered == 0 then
        return
    end
    local dict = ngx.shared.pyngress_spans
    local ok = dict:rpush(QUEUE, cjson.encode(buffer))
    if not ok then
        dropped = dropped + buffered
    end
    clear_table(buffer)
    buffered = 0
    if dropped > 0 and dict:incr(DROPPED, dropped, 0) then
        dropped = 0
    end
end

-- log_by_lua: one span for a sampled request.
function _M.record()
    if unrecorded == 0 then
        return
    end
    local var = ngx.var
    local trace = var.pyngress_trace
    if not trace or trace == "" then
        return
    end
    unrecorded = unrecorded - 1
    buffered = buffered + 1
    buffer[buffered] = { trace, var.pyngress_span_fields, var.request_uri, var.http_user_agent or "",
                         ngx.req.start_time(), ngx.now() }
    if buffered >= SPANS_PER_BATCH then
        push()
    end
end

-- init_worker: the batch timer; it also runs when the worker exits (premature), so a reload loses nothing.
function _M.start_worker()
    if not settings.tracing then
        return
    end
    local ok, err = ngx.timer.every(FLUSH_SECONDS, push)
    if not ok then
        ngx.log(ngx.ERR, "no spans from this worker: cannot start its timer: ", err)
    end
end

-- GET /configuration/spans: the tracer's settings and up to TAKE_BATCHES batches, each returned once.
function _M.take()
    local dict = ngx.shared.pyngress_spans
    local config = settings.tracing
    if not dict or not config then
        return '{"exporter":null,"dropped":0,"more":false,"batches":[]}'
    end
    local batches = {}
    for i = 1, TAKE_BATCHES do
        local batch = dict:lpop(QUEUE)
        if not batch then
            break
        end
        batches[i] = batch
    end
    local lost = dict:get(DROPPED) or 0
    if lost > 0 then
        dict:incr(DROPPED, -lost)
    end
    return '{"exporter":' .. cjson.encode(config.exporter) .. ',"dropped":' .. lost .. ',"more":'
           .. tostring((dict:llen(QUEUE) or 0) > 0) .. ',"batches":[' .. concat(batches, ",") .. ']}'
end

return _M
