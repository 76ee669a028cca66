-- router.lua: host, then exact path, longest prefix on element boundaries (or regexes in order), the host's
-- default, else the default backend.
local settings = require("pyngress.settings")
package.loaded["ngx.balancer"] = {}
require("pyngress.balancer")
local router = require("pyngress.router")
local tables = require("tables")
local fake_request = require("fake_request")

local function to(backend)
    return { backend = backend, profile = "default", ingress = "team/app" }
end

-- The backend a request for host and uri is sent to (its named location must be the profile's), or the answer.
local function route(host, uri, scheme)
    local vars = { host = host, uri = uri, request_uri = uri, scheme = scheme or "http", http_host = host,
                   pyngress_forwarded_host = host }
    local answer = fake_request.start(vars)
    router.route()
    if answer.exec == "@profile_default" then
        return vars.proxy_upstream_name
    end
    return answer.exec or answer.redirect or answer.status
end

describe("router", function()
    setup(function()
        settings.profiles = { default = true }
        settings.generate_request_id = false
        tables.push("backends", { exact = { "10.0.0.1:80" }, aaa = { "10.0.0.2:80" }, root = { "10.0.0.3:80" },
                                  wild = { "10.0.0.4:80" }, re1 = { "10.0.0.5:80" }, re2 = { "10.0.0.6:80" },
                                  fallback = { "10.0.0.7:80" } })
        tables.push("routes", {
            ["a.test"] = { exact = { ["/aaa"] = to("exact") }, prefix = { { "/aaa", to("aaa") }, { "/", to("root") } } },
            ["b.test"] = { exact = {}, prefix = { { "/api", to("aaa") } }, default = to("fallback") },
            ["*.wild.test"] = { exact = {}, prefix = { { "/", to("wild") } } },
            ["re.test"] = { regex = true, exact = {}, prefix = { { "/ab", to("re2") }, { "/a.+", to("re1") } } },
            ["tls.test"] = { tls = true, exact = {}, prefix = { { "/", to("root") } }, redirect_code = 301,
                             no_tls_redirect = { "/.well-known/acme-challenge" } },
        })
    end)
    after_each(fake_request.finish)

    it("takes an exact path before a prefix", function()
        assert.equals("exact", route("a.test", "/aaa"))
        assert.equals("aaa", route("a.test", "/aaa/"))
    end)

    it("matches prefixes on whole path elements, longest first", function()
        assert.equals("aaa", route("a.test", "/aaa/b/c"))
        assert.equals("root", route("a.test", "/aaab"))
        assert.equals("root", route("a.test", "/"))
    end)

    it("takes the host's default, else the built-in 404 for an unknown host", function()
        assert.equals("fallback", route("b.test", "/other"))
        assert.equals("@pyngress_default_backend", route("unknown.test", "/"))
    end)

    it("matches a wildcard host one label deep", function()
        assert.equals("wild", route("x.wild.test", "/"))
        assert.equals("@pyngress_default_backend", route("x.y.wild.test", "/"))
    end)

    it("tries regular expressions in the listed order", function()
        assert.equals("re2", route("re.test", "/ABC"))
        assert.equals("re1", route("re.test", "/ax"))
    end)

    it("redirects plain HTTP to HTTPS on a TLS host, except the ACME challenge", function()
        assert.equals("https://tls.test/x", route("tls.test", "/x"))
        assert.equals("root", route("tls.test", "/.well-known/acme-challenge/t"))
        assert.equals("root", route("tls.test", "/x", "https"))
    end)

    it("answers 503 for a route whose backend has no endpoints", function()
        tables.push("routes", { ["a.test"] = { exact = {}, prefix = { { "/", to("none") } } } })
        assert.equals(503, route("a.test", "/"))
    end)
end)
