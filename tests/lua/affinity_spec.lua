-- affinity.lua: the cookie names the endpoint (persistent) or a key that picks it (balanced), and the backend.
local affinity = require("pyngress.affinity")
local fake_request = require("fake_request")

local PEERS = { { "10.0.0.1", 80, "10.0.0.1:80" }, { "10.0.0.2", 80, "10.0.0.2:80" }, { "10.0.0.3", 80, "10.0.0.3:80" } }

describe("affinity", function()
    after_each(fake_request.finish)

    it("needs a cookie name", function()
        assert.has_error(function() affinity.config({ path = "/" }, "h/") end,
                         "h/: affinity must be an object with a cookie name")
    end)

    it("sets a cookie naming the endpoint and backend when none came (persistent)", function()
        local config = affinity.config({ cookie = "route", mode = "persistent", secure = true, samesite = "Lax" }, "h/")
        fake_request.start({ request_id = "0123456789abcdef0123456789abcdef" })
        local index = affinity.pick(config, PEERS, "web")
        local cookie = ngx.header["Set-Cookie"]
        assert.equals("route=" .. ngx.md5(PEERS[index][3]) .. "|" .. ngx.md5("web") .. "; Path=/; HttpOnly; Secure; SameSite=Lax",
                      cookie)
        -- The same cookie keeps the endpoint, and sets none.
        fake_request.start({ cookie_route = ngx.md5(PEERS[2][3]) .. "|" .. ngx.md5("web") })
        assert.equals(2, affinity.pick(config, PEERS, "web"))
        assert.is_nil(ngx.header["Set-Cookie"])
        assert.equals("stay", ngx.var.pyngress_affinity)
        assert.equals(ngx.md5("web"), affinity.backend_of(config))
    end)

    it("marks the cookie Secure over HTTPS, and over HTTP only with secure", function()
        local plain = affinity.config({ cookie = "s", path = "/app" }, "h/")
        for _, case in ipairs({ { plain, nil, false }, { plain, "on", true },
                                { affinity.config({ cookie = "s", path = "/app", secure = true }, "h/"), nil, true } }) do
            fake_request.start({ request_id = "0123456789abcdef0123456789abcdef", https = case[2] })
            affinity.pick(case[1], PEERS, "web")
            local cookie = ngx.header["Set-Cookie"]
            assert.truthy(cookie:find("; Path=/app; HttpOnly", 1, true))
            assert.equals(case[3], cookie:find("; Secure", 1, true) ~= nil)
        end
    end)

    it("picks the same endpoint for the same balanced key", function()
        local config = affinity.config({ cookie = "s" }, "h/")
        local key = ngx.md5("session")
        fake_request.start({ cookie_s = key .. "|" .. ngx.md5("web") })
        local first = affinity.pick(config, PEERS, "web")
        for _ = 1, 5 do
            fake_request.start({ cookie_s = key .. "|" .. ngx.md5("web") })
            assert.equals(first, affinity.pick(config, PEERS, "web"))
        end
    end)
end)
