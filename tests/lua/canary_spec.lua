-- canary.lua: the header, then the cookie, then the weight decide.
local canary = require("pyngress.canary")
local fake_request = require("fake_request")

local function decide(raw, vars)
    fake_request.start(vars)
    return canary.decide(canary.config(raw, "test"))
end

describe("canary", function()
    after_each(fake_request.finish)

    it("follows the header's always and never before the cookie", function()
        local raw = { backend = "c", header = "X-Canary", cookie = "canary", weight = 0 }
        assert.is_true(decide(raw, { http_x_canary = "always", cookie_canary = "never" }))
        assert.is_false(decide(raw, { http_x_canary = "never", cookie_canary = "always" }))
        assert.is_true(decide(raw, { http_x_canary = "other", cookie_canary = "always" }))
        assert.is_false(decide(raw, {}))
    end)

    it("takes a header value or pattern instead of always", function()
        assert.is_true(decide({ header = "X-C", header_value = "v2" }, { http_x_c = "v2" }))
        assert.is_false(decide({ header = "X-C", header_value = "v2" }, { http_x_c = "always" }))
        assert.is_true(decide({ header = "X-C", header_pattern = "^beta-" }, { http_x_c = "beta-7" }))
        assert.is_false(decide({ header = "X-C", header_pattern = "^beta-" }, { http_x_c = "alpha" }))
    end)

    it("sends all or none by weight", function()
        for _ = 1, 20 do
            assert.is_true(decide({ weight = 10, weight_total = 10 }, {}))
            assert.is_false(decide({ weight = 0 }, {}))
        end
    end)

    it("refuses a pattern PCRE does not compile and a zero weight total", function()
        assert.has_error(function() canary.config({ header_pattern = "(" }, "h/p") end)
        assert.has_error(function() canary.config({ weight_total = 0 }, "h/p") end,
                         "h/p: canary weight_total must be at least 1")
    end)
end)
