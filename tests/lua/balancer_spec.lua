-- balancer.lua: the router's choice, else round robin; a retry takes the next endpoint.
local tried = {}
local failure = nil
package.loaded["ngx.balancer"] = {
    set_current_peer = function(address, port) tried[#tried + 1] = address .. ":" .. port; return true end,
    set_more_tries = function() return true end,
    get_last_failure = function() return failure end,
}
local balancer = require("pyngress.balancer")
local tables = require("tables")
local fake_request = require("fake_request")

local ENDPOINTS = { "10.0.0.1:80", "10.0.0.2:80", "[fd00::3]:80" }

describe("balancer", function()
    setup(function() tables.push("backends", { web = ENDPOINTS }) end)
    before_each(function() tried, failure = {}, nil end)
    after_each(fake_request.finish)

    it("goes round the endpoints, one after the other", function()
        for _ = 1, 6 do
            fake_request.start({ pg_bal = "web" })
            balancer.balance()
        end
        local seen = {}
        for i = 1, 3 do
            seen[tried[i]] = true
            assert.equals(tried[i], tried[i + 3])
        end
        assert.same({ ["10.0.0.1:80"] = true, ["10.0.0.2:80"] = true, ["[fd00::3]:80"] = true }, seen)
    end)

    it("takes the endpoint the router chose, and the next one on a retry", function()
        fake_request.start({ pg_bal = "#3 web", pyngress_affinity = "" })
        balancer.balance()
        failure = "failed"
        balancer.balance()
        assert.same({ "[fd00::3]:80", "10.0.0.1:80" }, tried)
    end)

    it("refuses an endpoint that is not ip:port", function()
        local refused = tables.push("backends", { web = ENDPOINTS, bad = { "web:80" } })
        assert.matches("bad: endpoint web:80 is not <ip>:<port>", refused.bad, 1, true)
    end)
end)
