--[[
Where each member's value lies in a JSON text, as byte offsets, so that a whole table's entries go into a shared
dictionary straight from the pushed body (store.lua).

Why not cjson.encode each decoded entry again: every Lua string is interned, and this LuaJIT hashes a long string
by a sample of its bytes. 100,000 table entries, alike but for a host or a Service name outside the sampled bytes,
fall into a few hash chains that every new string walks with memcmp: storing the routes of 100,000 Ingresses took
from 1 s to over 10 minutes, by the hash seed of the worker (perf: lj_str_new under lua_pushlstring, from
cjson.encode). A span of the body is no Lua string.

The text must be valid JSON (cjson.decode has read it already): the scan only follows strings and nesting.
]]
local ffi = require("ffi")

local cjson = require("cjson.safe")

local _M = {}

local QUOTE, BACKSLASH, COMMA = 34, 92, 44
local OPEN_OBJECT, CLOSE_OBJECT, OPEN_ARRAY, CLOSE_ARRAY = 123, 125, 91, 93
local SPACE, TAB, NEWLINE, RETURN = 32, 9, 10, 13

local function skip_space(bytes, at)
    local b = bytes[at]
    while b == SPACE or b == NEWLINE or b == RETURN or b == TAB do
        at = at + 1
        b = bytes[at]
    end
    return at
end

-- The offset just after the string that starts (with its quote) at `at`, and whether it holds an escape.
local function string_end(bytes, at)
    local escaped = false
    at = at + 1
    while true do
        local b = bytes[at]
        if b == QUOTE then
            return at + 1, escaped
        elseif b == BACKSLASH then
            escaped = true
            at = at + 2
        else
            at = at + 1
        end
    end
end

-- The offset just after the value that starts at `at`.
local function value_end(bytes, at, stop)
    local b = bytes[at]
    if b == QUOTE then
        return (string_end(bytes, at))
    end
    if b ~= OPEN_OBJECT and b ~= OPEN_ARRAY then
        -- A number, true, false or null: up to the next delimiter.
        while at < stop do
            b = bytes[at]
            if b == COMMA or b == CLOSE_OBJECT or b == CLOSE_ARRAY or b == SPACE or b == NEWLINE or b == RETURN
                    or b == TAB then
                return at
            end
            at = at + 1
        end
        return at
    end
    local depth = 0
    while true do
        b = bytes[at]
        if b == QUOTE then
            at = string_end(bytes, at)
        else
            if b == OPEN_OBJECT or b == OPEN_ARRAY then
                depth = depth + 1
            elseif b == CLOSE_OBJECT or b == CLOSE_ARRAY then
                depth = depth - 1
                if depth == 0 then
                    return at + 1
                end
            end
            at = at + 1
        end
    end
end

local function key_of(text, from, to, escaped)
    if escaped then
        return cjson.decode(text:sub(from + 1, to))  -- offsets are 0-based, sub is 1-based
    end
    return text:sub(from + 2, to - 1)
end

-- Calls visit(key, value_start, value_end) for each member of the object that starts at `at`; returns the offset
-- after it.
local function members(text, bytes, at, stop, visit)
    at = skip_space(bytes, at + 1)
    if bytes[at] == CLOSE_OBJECT then
        return at + 1
    end
    while true do
        local key_end, escaped = string_end(bytes, at)
        local key = key_of(text, at, key_end, escaped)
        at = skip_space(bytes, key_end)  -- at the colon
        at = skip_space(bytes, at + 1)
        local finish = value_end(bytes, at, stop)
        visit(key, at, finish)
        at = skip_space(bytes, finish)
        if bytes[at] ~= COMMA then
            return at + 1
        end
        at = skip_space(bytes, at + 1)
    end
end

-- For the object member `name` of the JSON object `text`: a table of its members' keys -> {start, length} of their
-- values in `text` (0-based offsets), and `text` as bytes; nil when `text` has no such object member.
function _M.member_spans(text, name)
    local bytes = ffi.cast("const uint8_t *", text)
    local stop = #text
    local found
    local at = skip_space(bytes, 0)
    if bytes[at] ~= OPEN_OBJECT then
        return nil
    end
    members(text, bytes, at, stop, function(key, start, finish)
        if key == name and bytes[start] == OPEN_OBJECT then
            found = {}
            members(text, bytes, start, stop, function(member, value_start, value_finish)
                found[member] = { value_start, value_finish - value_start }
            end)
        end
    end)
    if not found then
        return nil
    end
    return found, bytes
end

return _M
