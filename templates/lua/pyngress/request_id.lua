--[[
Request ids ($req_id, X-Request-ID) for requests without the client's own: 32 lowercase hex digits of 16 random
bytes from OpenSSL, as nginx's $request_id. nginx calls RAND_bytes for each id, which costs about 6,600
instructions a request (OpenSSL 3 looks its generator up and checks for a fork on every call). Here a worker
draws the random bytes of IDS_PER_DRAW ids in one call and hex-encodes them at once; an id is then one string.

The buffers start empty and the master never draws: every worker fills its own after the fork (OpenSSL reseeds
its generator in each child), so no two workers, and no two replicas, hand out the same ids.
]]
local ffi = require("ffi")
local C = ffi.C

ffi.cdef [[
int RAND_bytes(unsigned char *buf, int num);
unsigned char *ngx_hex_dump(unsigned char *dst, unsigned char *src, size_t len);
]]

local ID_BYTES = 16
local ID_DIGITS = 2 * ID_BYTES
local IDS_PER_DRAW = 256

local random_bytes = ffi.new("unsigned char[?]", ID_BYTES * IDS_PER_DRAW)
local digits = ffi.new("unsigned char[?]", ID_DIGITS * IDS_PER_DRAW)
local next_id = IDS_PER_DRAW  -- all used: the first call in a worker draws

local _M = {}

-- A new id, or nil when OpenSSL has no random bytes to give (nginx's $request_id then takes over).
function _M.new()
    if next_id == IDS_PER_DRAW then
        if C.RAND_bytes(random_bytes, ID_BYTES * IDS_PER_DRAW) ~= 1 then
            return nil
        end
        C.ngx_hex_dump(digits, random_bytes, ID_BYTES * IDS_PER_DRAW)
        next_id = 0
    end
    local id = ffi.string(digits + next_id * ID_DIGITS, ID_DIGITS)
    next_id = next_id + 1
    return id
end

return _M
