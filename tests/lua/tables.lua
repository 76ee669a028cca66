-- Pushes for the specs: whole tables through store.lua as the configuration API hands them over.
local cjson = require("cjson.safe")
local store = require("pyngress.store")

local _M = {}
local pushes = 0

-- Pushes `data` whole to table `name`; returns store.put's answer (refused entries, or nil and why).
function _M.push(name, data)
    pushes = pushes + 1
    return store.put(name, cjson.encode({ version = name .. pushes, schema = store.SCHEMA_VERSION, data = data }))
end

return _M
