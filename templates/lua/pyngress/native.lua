--[[
pyngress's nginx module (nginx-module/) as Lua reaches it, through LuaJIT's FFI: nginx loads dynamic modules with
RTLD_GLOBAL, so their functions are in ffi.C, and nginx.conf always loads this one. The declarations below must
match the module's (nginx-module/*.c).

- the per-request metrics (monitor.lua): the module counts them in the log phase; the batch of counts, then clear;
- load-balance ewma (ewma.lua): the measures the module takes in the log phase of the requests marked for them;
- the balancer (balancer.lua, router.lua): each backend's endpoints as a peers object, and the router's choice of
  one for a request, which the module's balancer connects to;
- variables by index (router.lua): ngx.var lowercases and hashes a variable's name on every access.
]]
local ffi = require("ffi")
local base = require("resty.core.base")

ffi.cdef([[
size_t ngx_http_pyngress_metrics_batch(unsigned char **out);
void ngx_http_pyngress_metrics_clear(void);
int ngx_http_pyngress_ewma_measure(void *r);
double ngx_http_pyngress_ewma_score(const char *name, size_t len, double now);
void *ngx_http_pyngress_peers_new(int count);
int ngx_http_pyngress_peers_set(void *peers, int place, const char *address, size_t len, int port);
void ngx_http_pyngress_peers_release(void *peers);
int ngx_http_pyngress_balance(void *r, void *peers, int place);
void ngx_http_pyngress_balance_forget(void *r);
int ngx_http_pyngress_var_index(const char *name, size_t len, int writable);
const char *ngx_http_pyngress_var_get(void *r, int index, size_t *len);
int ngx_http_pyngress_var_set(void *r, int index, const char *value, size_t len);
]])

local C = ffi.C
local get_request = base.get_request
local value_length = ffi.new("size_t[1]")

local _M = { C = C }

-- `peers` (balancer.lua's endpoints of one backend: {address, port, text}) as a peers object for the module's
-- balancer, released when Lua drops it; nil when the module cannot take them (out of memory, or an address it does
-- not parse): the backend's requests then go to balancer_by_lua.
function _M.peers_of(peers)
    local count = #peers
    if count == 0 then
        return nil
    end
    local object = C.ngx_http_pyngress_peers_new(count)
    if object == nil then
        return nil
    end
    object = ffi.gc(object, C.ngx_http_pyngress_peers_release)
    for i = 1, count do
        local address = peers[i][1]
        if C.ngx_http_pyngress_peers_set(object, i - 1, address, #address, peers[i][2]) ~= 0 then
            return nil
        end
    end
    return object
end

-- Hands this request to the module's balancer: `object` (peers_of()), and the endpoint's place when the router chose
-- it (negative: ewma's choice, measured), else 0 for the round robin. false: balancer_by_lua balances it.
function _M.balance(object, place)
    return object ~= nil and C.ngx_http_pyngress_balance(get_request(), object, place) == 0
end

-- An error page: the request's choice is not for the error backend.
function _M.forget()
    C.ngx_http_pyngress_balance_forget(get_request())
end

-- Marks a request balanced by ewma in balancer_by_lua for its measure; false when out of memory.
function _M.measure_ewma()
    return C.ngx_http_pyngress_ewma_measure(get_request()) == 0
end

-- A reader of variable `name` for this worker's requests, by its index; nil when the configuration does not index
-- it (nginx.conf's pyngress_indexed_variables). In init_worker: the indexes are the running configuration's.
function _M.reader(name)
    local index = C.ngx_http_pyngress_var_index(name, #name, 0)
    if index < 0 then
        return nil
    end
    return function()
        local value = C.ngx_http_pyngress_var_get(get_request(), index, value_length)
        if value == nil then
            return nil
        end
        return ffi.string(value, value_length[0])
    end
end

-- A writer of variable `name` (one of `set`) taking a string, or nil to unset it as ngx.var does, as reader(); nil
-- when it is not such a variable.
function _M.writer(name)
    local index = C.ngx_http_pyngress_var_index(name, #name, 1)
    if index < 0 then
        return nil
    end
    return function(value)
        if C.ngx_http_pyngress_var_set(get_request(), index, value, value and #value or 0) ~= 0 then
            error("no memory to set $" .. name)
        end
    end
end

return _M
