-- Records which fields of the pushed tables nginx's Lua reads (tests/lua/test_schema_fields.py). INPUT_PATH names a
-- JSON file: {"entries": {"<table>": {"key": ..., "entry": ...}}, "bodies": {"<table>": [<body text>, ...]}} whose
-- objects marked "__record": "<name>" are read through a proxy that notes each field asked for. The table modules
-- build each entry as a push would (their store.define specs), and store.lua takes each body. Writes
-- {"schema_version": n, "reads": {"<record>": [field, ...]}, "errors": [...]} to stdout and exits.
local cjson = require("cjson.safe")
local store = require("pyngress.store")

local specs = {}
local define = store.define
store.define = function(name, spec)
    specs[name] = spec
    return define(name, spec)
end
require("pyngress.router")
require("pyngress.balancer")
require("pyngress.certificates")
store.define = define

local reads = {}

local function proxied(value)
    if type(value) ~= "table" then
        return value
    end
    for key, item in pairs(value) do
        value[key] = proxied(item)
    end
    local record = value.__record
    if not record then
        return value
    end
    value.__record = nil
    local seen = reads[record] or {}
    reads[record] = seen
    return setmetatable({}, { __index = function(_, key)
        seen[key] = true
        return value[key]
    end })
end

local file = assert(io.open(INPUT_PATH, "rb"))
local input = assert(cjson.decode(file:read("*a")))
file:close()

local errors = {}
local function try(what, fn, ...)
    local ok, err = pcall(fn, ...)
    if not ok then
        errors[#errors + 1] = what .. ": " .. tostring(err)
    end
end

for name, sample in pairs(input.entries) do
    local spec = specs[name]
    if spec.entry then
        try(name, spec.entry, sample.key, proxied(sample.entry))
    else
        try(name, spec.build, proxied(sample.entry), nil)
    end
end

-- store.lua decodes each body itself: the bodies given here are decoded into proxies.
local bodies = {}
local decode = cjson.decode
cjson.decode = function(text)
    local value, err = decode(text)
    if bodies[text] then
        return proxied(value), err
    end
    return value, err
end
for name, texts in pairs(input.bodies) do
    for _, text in ipairs(texts) do
        bodies[text] = true
        local answer = { store[text:find('"base"', 1, true) and "put_delta" or "put"](name, text) }
        if answer[1] == nil and answer[3] ~= 409 then
            errors[#errors + 1] = name .. " body: " .. tostring(answer[2])
        end
    end
end
cjson.decode = decode

local out = {}
for record, seen in pairs(reads) do
    local fields = {}
    for field in pairs(seen) do
        fields[#fields + 1] = field
    end
    table.sort(fields)
    out[record] = fields
end
io.stdout:write(cjson.encode({ schema_version = store.SCHEMA_VERSION, reads = out, errors = errors }), "\n")
io.stdout:flush()
os.exit(0)
