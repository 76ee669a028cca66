-- store.lua: whole pushes, deltas, refused entries keeping their last good value, the schema check.
local cjson = require("cjson.safe")
local store = require("pyngress.store")
package.loaded["ngx.balancer"] = {}  -- balancer.lua defines the backends table; its peer calls are not used here
require("pyngress.balancer")

-- A whole push in this Lua's schema unless `body` names one.
local function put(body)
    body.schema = body.schema or store.SCHEMA_VERSION
    return store.put("backends", cjson.encode(body))
end

describe("store", function()
    it("keeps a whole table and serves its entries", function()
        assert.same({}, put({ version = "w1", data = { web = { "10.0.0.1:80" } } }))
        assert.equals("10.0.0.1:80", store.get("backends").web[1][3])
        assert.equals("w1", store.versions().backends)
    end)

    it("refuses a bad entry alone, which keeps its last good value", function()
        put({ version = "w2", data = { web = { "10.0.0.1:80" }, api = { "10.0.0.2:81" } } })
        local refused = put({ version = "w3", data = { web = { "not-an-address" }, api = { "10.0.0.3:81" } } })
        assert.matches("endpoint not%-an%-address is not", refused.web)
        local backends = store.get("backends")
        assert.equals("10.0.0.1:80", backends.web[1][3])
        assert.equals("10.0.0.3:81", backends.api[1][3])
        assert.equals("w3", store.versions().backends)
        assert.matches("not%-an%-address", store.refused().backends.web)
    end)

    it("applies a delta to the version it holds and refuses one to another", function()
        put({ version = "d1", data = { web = { "10.0.0.1:80" }, old = { "10.0.0.9:80" } } })
        local _, err, status = store.put_delta("backends", cjson.encode(
            { base = "elsewhere", version = "d2", schema = store.SCHEMA_VERSION, set = {}, delete = { "old" } }))
        assert.equals(409, status)
        assert.matches("send the whole table", err)
        assert.same({}, store.put_delta("backends", cjson.encode(
            { base = "d1", version = "d2", schema = store.SCHEMA_VERSION, set = { web = { "10.0.0.5:80" } },
              delete = { "old" } })))
        local backends = store.get("backends")
        assert.equals("10.0.0.5:80", backends.web[1][3])
        assert.is_nil(backends.old)
    end)

    it("refuses a body of another schema whole; one without a schema is schema 1", function()
        put({ version = "s1", data = { web = { "10.0.0.1:80" } } })
        local refused, err = put({ version = "s2", schema = store.SCHEMA_VERSION + 1, data = {} })
        assert.is_nil(refused)
        assert.matches("this nginx's Lua reads schema " .. store.SCHEMA_VERSION, err, 1, true)
        local _, unversioned = store.put("backends", cjson.encode({ version = "s3", data = {} }))
        assert.matches("the body has table schema 1,", unversioned, 1, true)
        assert.equals("s1", store.versions().backends)
        assert.same({}, put({ version = "s4", data = { web = { "10.0.0.2:80" } } }))
    end)

    it("refuses a body that is no table", function()
        local refused, err = store.put("backends", '{"version": "x", "schema": ' .. store.SCHEMA_VERSION .. ', "data": ["a"]}')
        assert.is_nil(refused)
        assert.equals('the body needs a "data" object', err)
    end)
end)
