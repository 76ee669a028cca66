-- gateway.lua's misdirected requests and backendRef filters, gateway_cors.lua's origins and headers: the cases one by
-- one, which the e2e tests (tests/e2e/gateway/test_backend_filters_and_cors.py) reach only through nginx.
local gateway = require("pyngress.gateway")
local gateway_cors = require("pyngress.gateway_cors")
local fake_request = require("fake_request")

local function routes(listeners, action)
    return gateway.routes_of({ layers = { { exact = { ["/"] = { { action = 1 } } } } },
                               actions = { action or { route = "ns/r", path = "/", profile = "default" } },
                               https_listeners = listeners }, "h.example")
end

describe("misdirected requests", function()
    local four = routes({ "", "second.org", "*.wild.org", "fourth.wild.org" })

    it("compare the most specific HTTPS listener of the SNI and of the Host", function()
        assert.is_true(gateway.misdirected(four, "example.org", "second.org"))
        assert.is_false(gateway.misdirected(four, "example.org", "unknown.org"))  -- both the listener without hostname
        assert.is_false(gateway.misdirected(four, "a.wild.org", "b.c.wild.org"))  -- a wildcard takes any depth
        assert.is_true(gateway.misdirected(four, "a.wild.org", "fourth.wild.org"))
        assert.is_true(gateway.misdirected(four, "fourth.wild.org", "a.wild.org"))
        assert.is_false(gateway.misdirected(four, "wild.org", "example.org"))  -- not below *.wild.org
    end)

    it("need a listener for each name, and several listeners", function()
        local two = routes({ "a.org", "b.org" })
        assert.is_true(gateway.misdirected(two, "a.org", "b.org"))
        assert.is_false(gateway.misdirected(two, "a.org", "c.org"))
        assert.is_false(gateway.misdirected(two, "c.org", "a.org"))
        assert.is_false(gateway.misdirected(routes(nil), "a.org", "b.org"))
    end)
end)

describe("a backendRef's filters", function()
    it("change the request after the rule's", function()
        local entry = routes(nil, { route = "ns/r", path = "/", profile = "default",
            request_headers = { set = { { "X-A", "rule" }, { "X-B", "rule" } } },
            backends = { { backend = "b", weight = 1, filters = {
                request_headers = { set = { { "X-A", "backend" } } }, rewrite_path = "/new" } } } })
        local action = gateway.find(entry, "/")
        local answer = fake_request.start({}, {})
        gateway.change_request(action, "/", "/", gateway.pick(action))
        fake_request.finish()
        assert.are.same({ ["X-A"] = "backend", ["X-B"] = "rule" }, answer.headers)
        assert.are.equal("/new", answer.uri)
    end)
end)

describe("CORS", function()
    local function policy(raw)
        local entry = routes(nil, { route = "ns/r", path = "/", profile = "default", cors = raw })
        return gateway.find(entry, "/").cors
    end
    local wildcard = policy({ origins = { { scheme = "https", host = "*.bar.com", port = 443 },
                                          { scheme = "http", host = "www.foo.com", port = 8080 } },
                              methods = { "*" }, headers = { "*" }, expose = { "*" }, credentials = true,
                              max_age = 5 })

    local function preflight(origin, vars)
        local request = { http_origin = origin, request_method = "OPTIONS", http_access_control_request_method = "PUT",
                          http_access_control_request_headers = "x-a, x-b" }
        for k, v in pairs(vars or {}) do
            request[k] = v
        end
        local answer = fake_request.start(request, {})
        assert.is_true(gateway_cors.is_preflight())
        gateway_cors.preflight(wildcard)
        local headers = ngx.header
        fake_request.finish()
        return answer.status, headers
    end

    it("matches scheme, host (any labels before a wildcard) and port", function()
        for _, origin in ipairs({ "https://a.bar.com", "https://x.y.bar.com:443", "HTTPS://A.BAR.COM",
                                  "http://www.foo.com:8080" }) do
            local status, headers = preflight(origin)
            assert.are.equal(204, status)
            assert.are.equal(origin, headers["Access-Control-Allow-Origin"])
        end
        for _, origin in ipairs({ "https://bar.com", "http://a.bar.com", "https://a.bar.com:8443",
                                  "http://www.foo.com", "https://a.bar.com.evil.com", "null" }) do
            local status, headers = preflight(origin)
            assert.are.equal(204, status)
            assert.is_nil(headers["Access-Control-Allow-Origin"])
        end
    end)

    it("echoes what the preflight asks for a wildcard, and never exposes * with credentials", function()
        local _, headers = preflight("https://a.bar.com")
        assert.are.equal("PUT", headers["Access-Control-Allow-Methods"])
        assert.are.equal("x-a, x-b", headers["Access-Control-Allow-Headers"])
        assert.are.equal("true", headers["Access-Control-Allow-Credentials"])
        assert.are.equal("5", headers["Access-Control-Max-Age"])
        assert.is_nil(headers["Access-Control-Expose-Headers"])
    end)

    it("adds the response headers of an allowed origin only", function()
        fake_request.start({ http_origin = "https://a.bar.com" }, {})
        local changes = gateway_cors.response_changes(wildcard)
        fake_request.start({ http_origin = "https://evil.com" }, {})
        local none = gateway_cors.response_changes(wildcard)
        fake_request.finish()
        assert.are.same({ { "Access-Control-Allow-Origin", "https://a.bar.com" },
                          { "Access-Control-Allow-Credentials", "true" } }, changes.set)
        assert.is_nil(none)
    end)
end)
