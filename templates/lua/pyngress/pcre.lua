--[[
Regular expressions from the tables the syncer pushes, checked when an entry is built: nginx's PCRE is the engine
that will run them, so a pattern it refuses refuses that entry (store.lua), instead of failing each request.
]]
local re_find = ngx.re.find

local _M = {}

-- `pattern` (nil passes) when PCRE compiles it with `flags`; else error("<what> is not a regular expression nginx
-- can use: <PCRE's message>").
function _M.checked(pattern, flags, what)
    if pattern == nil then
        return nil
    end
    local _, _, err = re_find("", pattern, flags)
    if err then
        error(what .. " is not a regular expression nginx can use: " .. err, 0)
    end
    return pattern
end

return _M
