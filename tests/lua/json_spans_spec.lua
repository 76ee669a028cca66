-- json_spans.lua: each member's value located in the JSON text as it was written, whatever its spacing, escapes and
-- nesting; store.lua keeps those spans of a pushed body as the table's entries.
local cjson = require("cjson.safe")
local json_spans = require("pyngress.json_spans")

-- The member values of `name` in `text`, each as the text of its span.
local function values(text, name)
    local spans = json_spans.member_spans(text, name)
    if not spans then
        return nil
    end
    local out = {}
    for key, span in pairs(spans) do
        out[key] = text:sub(span[1] + 1, span[1] + span[2])
    end
    return out
end

describe("json_spans", function()
    it("finds each member of the named object, as written", function()
        local text = '{"version":"v1","schema":3,"data":{"a.test":{"prefix":[["/",{"backend":"x"}]]},"b.test":null}}'
        assert.same({ ["a.test"] = '{"prefix":[["/",{"backend":"x"}]]}', ["b.test"] = "null" }, values(text, "data"))
    end)

    it("follows spaces, strings holding braces, quotes and backslashes, and escaped keys", function()
        local text = ' { "data" : { "a" : { "s" : "}{\\"[]\\\\" , "n" : [ 1 , { } ] } ,\n\t"b\\u0041" :  -1.5e3 ,'
            .. ' "c" : "x" , "d" : [ ] } , "version" : "v" } '
        local found = values(text, "data")
        assert.same({ a = '{ "s" : "}{\\"[]\\\\" , "n" : [ 1 , { } ] }', bA = "-1.5e3", c = '"x"', d = "[ ]" }, found)
        for key, value in pairs(found) do
            assert.is_not_nil(cjson.decode(value), key)  -- each span is whole JSON
        end
    end)

    it("takes the named member wherever it is, and the last of a repeated key as cjson does", function()
        assert.same({ k = "2" }, values('{"data":{"k":1,"k":2},"version":"v"}', "data"))
        assert.same({}, values('{"version":"v","data":{}}', "data"))
        assert.same({ inner = "{}" }, values('{"other":{"data":{"no":1}},"data":{"inner":{}}}', "data"))
    end)

    it("says when there is no such object", function()
        assert.is_nil(values('{"version":"v"}', "data"))
        assert.is_nil(values('{"data":["a"]}', "data"))
        assert.is_nil(values('["data"]', "data"))
    end)

    it("agrees with cjson on a large random table", function()
        math.randomseed(7)
        local data = {}
        for i = 1, 2000 do
            local entry = { prefix = { { "/p" .. i, { backend = "svc-" .. i, weight = i % 7, hsts = i % 2 == 0 } } } }
            if i % 3 == 0 then
                entry.note = 'quote " brace } bracket ] slash \\ ' .. string.char(math.random(32, 126))
            end
            data["h" .. i .. ".test"] = entry
        end
        local text = cjson.encode({ version = "v", schema = 3, data = data })
        local found = values(text, "data")
        local count = 0
        for key, value in pairs(found) do
            count = count + 1
            assert.same(data[key], cjson.decode(value))
        end
        assert.equals(2000, count)
    end)
end)
