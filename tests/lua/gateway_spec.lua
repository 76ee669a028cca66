-- gateway.lua through router.lua: a host's HTTPRoute rules (layers, the spec's precedence, falling back to the next
-- candidate path), weights, redirects, rewrites and header changes; the Ingress paths when no rule matches.
local settings = require("pyngress.settings")
package.loaded["ngx.balancer"] = {}
require("pyngress.balancer")
local router = require("pyngress.router")
local gateway = require("pyngress.gateway")
local tables = require("tables")
local fake_request = require("fake_request")
local null = require("cjson.safe").null

local function action(route, backend, extra)
    local found = { route = route, path = "/", profile = "default",
                    backends = { { backend = backend, weight = 1, service = backend } } }
    for k, v in pairs(extra or {}) do
        found[k] = v
    end
    return found
end

local function match(index, conditions)
    local found = { action = index }
    for k, v in pairs(conditions or {}) do
        found[k] = v
    end
    return found
end

-- What a request gets: the backend, or the redirect, or the status; and the request it made (fake_request).
local function request(host, uri, options)
    options = options or {}
    local request_uri = uri .. (options.query_string and ("?" .. options.query_string) or "")
    local vars = { host = host, uri = uri, request_uri = request_uri, scheme = options.scheme or "http",
                   http_host = host, pyngress_forwarded_host = host, pyngress_server_port = options.port or "80",
                   server_port = options.own_port }
    local answer = fake_request.start(vars, options)
    router.route(options.own_port ~= nil or nil)  -- true in the server of the ports listeners have to themselves
    answer.vars = vars
    if answer.exec == "@profile_default" then
        return vars.proxy_upstream_name, answer
    end
    return answer.redirect or answer.status or answer.exec, answer
end

local function to(backend)
    return { backend = backend, profile = "default", ingress = "team/legacy" }
end

describe("gateway", function()
    setup(function()
        settings.profiles = { default = true }
        settings.generate_request_id = false
        local backends = {}
        for _, name in ipairs({ "exact", "prefix", "root", "header", "query", "method", "older", "wild", "any",
                                "legacy", "v1", "v2", "secure", "regex" }) do
            backends[name] = { "10.0.0.1:80" }
        end
        tables.push("backends", backends)
        local refused = tables.push("routes", {
            ["app.test"] = {
                exact = {}, prefix = { { "/legacy", to("legacy") } },
                gateway = {
                    actions = {
                        action("team/exact", "exact"), action("team/prefix", "prefix"), action("team/root", "root"),
                        action("team/header", "header"), action("team/query", "query"),
                        action("team/method", "method"), action("team/older", "older"),
                        action("team/secure", "secure"), action("team/regex", "regex"),
                    },
                    layers = {
                        {
                            exact = { ["/a/b"] = { match(1) } },
                            regex = { { "/r/[0-9]+", { match(9) } } },
                            prefix = {
                                { "/a/b", { match(4, { headers = { { name = "x-version", value = "2" } } }) } },
                                { "/a", { match(6, { method = "POST" }),
                                          match(4, { headers = { { name = "x-re", value = "^v[0-9]$", regex = true } } }),
                                          match(5, { query = { { name = "q", value = "1" } } }),
                                          match(7), match(2) } },
                                { "/admin", { match(8, { scheme = "https" }) } },
                                { "/", { match(3, { headers = { { name = "x-root", value = "yes" } } }) } },
                            },
                        },
                    },
                },
            },
            ["ports.test"] = {
                exact = {}, prefix = {},
                gateway = { actions = { action("team/v1", "v1"), action("team/v2", "v2") },
                            layers = { { prefix = { { "/", { match(1, { port = 8080 }), match(2) } } } } } },
            },
            ["*.layers.test"] = {
                exact = {}, prefix = {},
                gateway = { actions = { action("team/wild", "wild"), action("team/any", "any") },
                            layers = { { prefix = { { "/w", { match(1) } } } },
                                       { prefix = { { "/", { match(2) } } } } } },
            },
        })
        assert.same({}, refused)
    end)
    after_each(fake_request.finish)

    it("takes an exact path first, then regular expressions, then the longest prefix", function()
        assert.equals("exact", request("app.test", "/a/b"))
        assert.equals("regex", request("app.test", "/r/12"))
        assert.equals("@pyngress_default_backend", request("app.test", "/r/12/x"))  -- a regex takes whole paths
    end)

    it("falls back to the next candidate path when a longer path's conditions all fail", function()
        assert.equals("header", request("app.test", "/a/b/c", { headers = { ["x-version"] = "2" } }))
        assert.equals("older", request("app.test", "/a/b/c"))
    end)

    it("orders one path's matches: method, headers, query, then the older route", function()
        assert.equals("method", request("app.test", "/a/x", { method = "POST", headers = { ["x-re"] = "v1" } }))
        assert.equals("header", request("app.test", "/a/x", { headers = { ["x-re"] = "v1" }, args = { q = "1" } }))
        assert.equals("query", request("app.test", "/a/x", { headers = { ["x-re"] = "vv" }, args = { q = "1" } }))
        assert.equals("older", request("app.test", "/a"))
    end)

    it("matches a rule of an HTTPS listener only over TLS", function()
        assert.equals("secure", request("app.test", "/admin", { scheme = "https" }))
        assert.equals("legacy", request("app.test", "/legacy"))
        assert.equals("@pyngress_default_backend", request("app.test", "/admin"))
    end)

    it("matches a rule of a listener on a port of its own only on that port, and no Ingress path there", function()
        assert.equals("v2", request("ports.test", "/x"))
        assert.equals("v1", request("ports.test", "/x", { own_port = "8080" }))
        assert.equals("@pyngress_default_backend", request("ports.test", "/x", { own_port = "8090" }))
        assert.equals("v1", request("ports.test", "/legacy/x", { own_port = "8080" }))
        assert.equals("@pyngress_default_backend", request("app.test", "/legacy", { own_port = "8080" }))
        assert.equals("@pyngress_default_backend", request("nowhere.test", "/", { own_port = "8080" }))
    end)

    it("leaves a request no rule takes to the Ingress paths", function()
        assert.equals("legacy", request("app.test", "/legacy/x"))
        assert.equals("root", request("app.test", "/other", { headers = { ["x-root"] = "yes" } }))
    end)

    it("tries the host's layers in order", function()
        assert.equals("wild", request("x.layers.test", "/w/1"))
        assert.equals("any", request("x.layers.test", "/z"))
    end)

    it("matches a Gateway wildcard host any number of labels deep, with its Gateway rules only", function()
        assert.equals("wild", request("x.y.layers.test", "/w/1"))
        tables.push("routes", { ["*.mixed.test"] = {
            exact = {}, prefix = { { "/ingress", to("legacy") } },
            gateway = { actions = { action("team/wild", "wild") }, layers = { { prefix = { { "/w", { match(1) } } } } } } },
            ["*.plain.test"] = { exact = {}, prefix = { { "/", to("legacy") } } } })
        assert.equals("legacy", request("x.mixed.test", "/ingress"))
        assert.equals("wild", request("x.y.mixed.test", "/w"))
        assert.equals("@pyngress_default_backend", request("x.y.mixed.test", "/ingress"))
        assert.equals("@pyngress_default_backend", request("x.y.plain.test", "/"))  -- an Ingress wildcard: one label
    end)

    it("answers 500 for a rule without a usable backend and picks backends by weight", function()
        local split = { backends = { { backend = "v1", weight = 3 }, { backend = "v2", weight = 1 },
                                     { backend = null, weight = 0 } }, route = "t/s", path = "/", profile = "default" }
        local routes = gateway.routes_of({ actions = { split, { route = "t/none", path = "/", profile = "default" } },
                                           layers = { { prefix = { { "/", { match(1) } } },
                                                        exact = { ["/none"] = { match(2) } } } } }, "w.test")
        local seen = { v1 = 0, v2 = 0 }
        local picked = gateway.find(routes, "/x")
        for _ = 1, 4000 do
            local entry = gateway.pick(picked)
            seen[entry.backend] = seen[entry.backend] + 1
        end
        assert.is_true(seen.v1 > 2700 and seen.v1 < 3300, "v1 " .. seen.v1)
        assert.is_nil(gateway.pick((gateway.find(routes, "/none"))))
    end)

    it("redirects with the scheme, host, port, path and status the filter gives", function()
        local function redirected(redirect, uri, options)
            local routes = { ["r.test"] = { exact = {}, prefix = {}, gateway = {
                actions = { { route = "t/r", path = "/", profile = "default", redirect = redirect } },
                layers = { { prefix = { { "/old", { match(1) } }, { "/", { match(1) } } } } } } } }
            tables.push("routes", routes)
            local answer = request("r.test", uri, options)
            return answer
        end
        assert.equals("https://r.test/x?a=1", redirected({ scheme = "https", code = 301 }, "/x", { query_string = "a=1" }))
        assert.equals("http://other.test/x", redirected({ hostname = "other.test", code = 302 }, "/x"))
        assert.equals("http://r.test:8080/x", redirected({ port = 8080, code = 302 }, "/x"))
        assert.equals("http://r.test:8081/x", redirected({ code = 302 }, "/x", { port = "8081" }))
        assert.equals("http://r.test/new", redirected({ path = "/new", code = 302 }, "/x"))
        assert.equals("http://r.test/new/y", redirected({ path = "/new", prefix = true, code = 302 }, "/old/y"))
        local _, answer = request("r.test", "/x")
        assert.equals(302, answer.status)
    end)

    it("rewrites the path and host and changes request headers", function()
        tables.push("routes", { ["rw.test"] = { exact = {}, prefix = {}, gateway = {
            actions = { { route = "t/rw", path = "/", profile = "default", backends = { { backend = "v1", weight = 1 } },
                          rewrite_prefix = true, rewrite_path = "/", rewrite_host = "inner.test",
                          request_headers = { set = { { "X-Set", "s" } }, add = { { "X-Add", "a" } },
                                              remove = { "X-Gone" } } } },
            layers = { { prefix = { { "/api", { match(1) } } } } } } } })
        local backend, answer = request("rw.test", "/api/users", { headers = { ["x-add"] = "first" } })
        assert.equals("v1", backend)
        assert.equals("/users", answer.uri)
        assert.equals("inner.test", answer.vars.pyngress_best_http_host)
        assert.same({ ["X-Set"] = "s", ["X-Add"] = "first,a", ["X-Gone"] = false }, answer.headers)
    end)

    it("replaces a matched prefix on path element boundaries", function()
        assert.equals("/x", gateway.replace_prefix("/api/x", "/api", "/"))
        assert.equals("/v2/x", gateway.replace_prefix("/api/x", "/api", "/v2/"))
        assert.equals("/v2", gateway.replace_prefix("/api", "/api", "/v2"))
        assert.equals("/v2/", gateway.replace_prefix("/api/", "/api", "/v2"))
        assert.equals("/v2/x", gateway.replace_prefix("/x", "/", "/v2"))
        assert.equals("/v2", gateway.replace_prefix("/", "/", "/v2"))
    end)

    it("refuses an entry whose match names no action", function()
        assert.has_error(function()
            gateway.routes_of({ actions = {}, layers = { { prefix = { { "/", { match(1) } } } } } }, "bad.test")
        end, "bad.test gateway layer 1 /: action must be the index of one of the host's actions")
    end)
end)
