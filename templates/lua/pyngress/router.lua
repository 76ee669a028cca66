--[[
Routes each request (rewrite phase of `location /`) to the named location of its route's profile.

The routes table (POST /configuration/routes), one entry per host as HostRoutes.to_json() gives it:

    {"<host>": {"exact": {"<path>": <route>, ...},
                "prefix": [["<path>", <route>], ...],
                "default": <route> | null,
                "tls": bool, "ssl_redirect": bool, "force_ssl_redirect": bool,
                "hsts": "<Strict-Transport-Security value>" | null,
                "client_auth": {"<ns/name>": <client_auth.lua config>, ...} (optional),
                "redirect_code": 301 | 302 | 307 | 308, "no_tls_redirect": ["<path prefix>", ...]
                (hosts that may redirect)}}
    <route> = {"backend": "<backend name>" | null, "profile": "<profile name>", "ingress": "ns/name",
               "default_backend": "<backend name>" (optional: default-backend)}

A route whose Ingress has a client_auth entry has the client's certificate checked (client_auth.lua) before
anything else about the route.

A host with "redirect_host" (from-to-www-redirect) answers every request with a redirect to that host (308, or
the ConfigMap's http-redirect-code).
A host's "gateway" entry (gateway.lua) holds its HTTPRoute rules: tried first, after from-to-www-redirect; a
request one of them takes is redirected or sent to its backend chosen by weight (500 when it has none usable), and
the host's TLS redirect and Ingress paths do not apply to it.
A route's "canary" (canary.lua) may send the request to the canary Ingress's backend instead.
With "regex": true (use-regex), the prefix paths are regular expressions matched from the start of the
URI, case-insensitively, in the listed order (rewrite.lua); a route's "rewrite" (rewrite-target) is then
the URI sent to the backend. "app_root": "/" answers 302 to that path.

<host> is a lowercase name, a wildcard "*.example.com" (exactly one more label; for its Gateway rules, any number)
or "_" (any other host).
Prefix paths carry no trailing slash (except "/") and match whole path elements: "/aaa" matches "/aaa",
"/aaa/" and "/aaa/b", not "/aaab".

Order: host (exact, wildcard, "_"; none → the default backend), then on plain HTTP the redirect to HTTPS,
then the path: exact, longest prefix, the host's default, else the default backend. A route without a
backend, or whose backend has no endpoints, goes to the --default-backend-service when it has endpoints, else
answers 503 here: from the balancer it could only be a 500. The default backend is that Service when it has
endpoints, else the built-in 404. A body
whose Content-Length is above the route profile's client_max_body_size answers 413 here.
]]
local store = require("pyngress.store")
local settings = require("pyngress.settings")
local client_auth = require("pyngress.client_auth")
local rewrite = require("pyngress.rewrite")
local canary = require("pyngress.canary")
local affinity = require("pyngress.affinity")
local hashing = require("pyngress.hashing")
local ewma = require("pyngress.ewma")
local native = require("pyngress.native")
local monitor = require("pyngress.monitor")
local request_id = require("pyngress.request_id")
local tracing = require("pyngress.tracing")
local gateway = require("pyngress.gateway")
local gateway_budget = require("pyngress.gateway_budget")
local gateway_cors = require("pyngress.gateway_cors")
local cjson = require("cjson.safe")

local byte, sub, find, lower, match = string.byte, string.sub, string.find, string.lower, string.match
local null = cjson.null
local SLASH, STAR = 47, 42
-- The --default-backend-service backend (services/syncer/model/backends.py): in the backends table only when set.
local DEFAULT_BACKEND = "upstream-default-backend"

local _M = {}

-- The variables every routed request reads or writes, by index once init_worker() found them (native.lua: ngx.var
-- hashes the name on each access); through ngx.var until then (the busted specs stand in for ngx.var).
local variables = {
    host = function() return ngx.var.host end,
    uri = function() return ngx.var.uri end,
    scheme = function() return ngx.var.scheme end,
    set_request_id = function(value) ngx.var.pg_rid = value end,
    set_metric = function(value) ngx.var.pyngress_metric = value end,
    set_upstream_name = function(value) ngx.var.proxy_upstream_name = value end,
    set_hsts = function(value) ngx.var.pyngress_hsts = value end,
}

function _M.init_worker()
    local found = {
        host = native.reader("host"),
        uri = native.reader("uri"),
        scheme = native.reader("scheme"),
        set_request_id = native.writer("pg_rid"),
        set_metric = native.writer("pyngress_metric"),
        set_upstream_name = native.writer("proxy_upstream_name"),
        set_hsts = native.writer("pyngress_hsts"),
    }
    for name, accessor in pairs(found) do
        variables[name] = accessor
    end
end

-- `host` and `path` are the routes table's keys, for the route's metric labels.
local function route_of(raw, where, auths, host, path)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" then
        error(where .. ": a route must be an object", 0)
    end
    local backend = raw.backend
    if backend == null then
        backend = nil
    end
    if backend ~= nil and type(backend) ~= "string" then
        error(where .. ": backend must be a string or null", 0)
    end
    local profile = raw.profile
    if profile == nil or profile == null then
        profile = "default"
    end
    if type(profile) ~= "string" then
        error(where .. ": profile must be a string", 0)
    end
    local ingress = type(raw.ingress) == "string" and raw.ingress or nil
    local service = type(raw.service) == "string" and raw.service or nil
    local route = { backend = backend, profile = profile, location = "@profile_" .. profile,
                    client_auth = ingress and auths[ingress] or nil,
                    rewrite = type(raw.rewrite) == "string" and raw.rewrite or nil,
                    canary = canary.config(raw.canary, where),
                    affinity = affinity.config(raw.affinity, where),
                    hash_by = type(raw.hash_by) == "string" and raw.hash_by or nil,
                    ewma = raw.ewma == true,
                    hash_subset_size = tonumber(raw.hash_subset_size),
                    preserve_trailing_slash = raw.preserve_trailing_slash == true,
                    port_in_redirects = raw.port_in_redirects == true,
                    rewrite_log = raw.rewrite_log == true,
                    ingress = ingress,
                    default_backend = type(raw.default_backend) == "string" and raw.default_backend or nil,
                    service = service or "",
                    service_port = type(raw.service_port) == "string" and raw.service_port or "",
                    metric = monitor.labels_of(host, ingress, service, path),
                    path = path, trace = tracing.route_config(raw) }
    if route.canary then
        route.metric_canary = monitor.labels_of(host, ingress, service, path, route.canary.backend)
    end
    if route.affinity then
        route.backend_key = affinity.backend_key(backend)  -- what its cookie names when the main backend set it
    end
    return route
end

local function path_of(path, where)
    if type(path) ~= "string" or byte(path, 1) ~= SLASH then
        error(where .. ": a path must be a string starting with /", 0)
    end
    return path
end

-- ConfigMap http-redirect-code: the codes it may be.
local REDIRECT_CODES = { [301] = true, [302] = true, [307] = true, [308] = true }

local function string_list(value, what)
    if value == nil or value == null then
        return {}
    end
    if type(value) ~= "table" then
        error(what .. " must be a list of strings", 0)
    end
    for _, item in ipairs(value) do
        if type(item) ~= "string" then
            error(what .. " must be a list of strings", 0)
        end
    end
    return value
end

local function host_of(raw, host)
    if type(raw) ~= "table" then
        error(host .. ": host routes must be an object", 0)
    end
    local auths, ask = client_auth.configs(raw.client_auth, host, type(raw.gateway) == "table"
                                           and raw.gateway.client_auth or nil)
    local entry = {
        client_certificate = ask,  -- what the handshake asks for (client_auth.request), or nil
        gateway_auth = auths[client_auth.GATEWAY],  -- the HTTPS listener's client-certificate validation, or nil
        exact = {},
        prefix = {},         -- path -> route, looked up at each path element boundary
        longest_prefix = 0,  -- no candidate longer than this can match
        tls = raw.tls == true,
        ssl_redirect = raw.ssl_redirect ~= false,
        force_ssl_redirect = raw.force_ssl_redirect == true,
        hsts = type(raw.hsts) == "string" and raw.hsts ~= "" and raw.hsts or nil,
        app_root = type(raw.app_root) == "string" and raw.app_root or nil,
        redirect_host = type(raw.redirect_host) == "string" and raw.redirect_host or nil,
        redirect_code = REDIRECT_CODES[raw.redirect_code] and raw.redirect_code or 308,
        no_tls_redirect = string_list(raw.no_tls_redirect, host .. ": no_tls_redirect"),
        metric = monitor.host_labels(host),  -- requests no route of the host takes
        gateway = gateway.routes_of(raw.gateway, host),  -- HTTPRoute rules (gateway.lua), tried before the paths
    }
    local exact = raw.exact
    if exact ~= nil and exact ~= null then
        if type(exact) ~= "table" then
            error(host .. ": exact must be an object", 0)
        end
        for path, route in pairs(exact) do
            entry.exact[path_of(path, host)] = route_of(route, host .. path, auths, host, path)
        end
    end
    local prefix = raw.prefix
    if prefix ~= nil and prefix ~= null then
        if type(prefix) ~= "table" then
            error(host .. ": prefix must be a list of [path, route]", 0)
        end
        local built = {}
        for i, pair in ipairs(prefix) do
            if type(pair) ~= "table" then
                error(host .. ": prefix must be a list of [path, route]", 0)
            end
            local path = path_of(pair[1], host)
            local route = route_of(pair[2], host .. path, auths, host, path)
            entry.prefix[path] = route
            built[i] = { path, route }
            if #path > entry.longest_prefix then
                entry.longest_prefix = #path
            end
        end
        if raw.regex == true then
            entry.regex = rewrite.compile(built, host)
        end
    end
    entry.default = route_of(raw.default, host .. " default", auths, host, "/")
    -- Its requests are the Ingress's, which never answer 421 (misdirected): decided here, not per request.
    entry.ingress_paths = entry.default ~= nil or entry.longest_prefix > 0 or next(entry.exact) ~= nil
    if entry.gateway and byte(host, 1) == STAR then
        -- A Gateway API wildcard matches any number of labels, an Ingress one only one: names deeper than one label
        -- get this host's Gateway rules alone (find_host).
        entry.deeper = { exact = {}, prefix = {}, longest_prefix = 0, gateway = entry.gateway, metric = entry.metric,
                         gateway_auth = entry.gateway_auth,
                         redirect_code = entry.redirect_code, no_tls_redirect = {} }
    end
    return entry
end

-- One host's entry of the routes table (hosts are lower case, as the syncer writes them).
local function entry_of(host, raw)
    if host ~= lower(host) then
        error("host " .. host .. " must be lower case", 0)
    end
    return host_of(raw, host)
end

store.define("routes", { entry = entry_of })

-- The longest prefix that ends at a path element boundary of `uri`: the whole URI, or the part before
-- any "/", or "/" itself.
local function match_prefix(entry, uri)
    local prefixes = entry.prefix
    local len = #uri
    if len <= entry.longest_prefix then
        local route = prefixes[uri]
        if route then
            return route
        end
    end
    local i = len < entry.longest_prefix + 1 and len or entry.longest_prefix + 1
    while i > 1 do
        if byte(uri, i) == SLASH then
            local route = prefixes[sub(uri, 1, i - 1)]
            if route then
                return route
            end
        end
        i = i - 1
    end
    return prefixes["/"]
end

-- What no route takes: the --default-backend-service when it has endpoints, as in ingress-nginx (its answer goes
-- through the ConfigMap's custom-http-errors like any backend's); else the built-in 404.
local function default_backend()
    local peers = store.current("backends")[DEFAULT_BACKEND]
    if peers and #peers > 0 then
        local var = ngx.var
        var.proxy_upstream_name, var.pg_bal = DEFAULT_BACKEND, DEFAULT_BACKEND
        return ngx.exec("@profile_default")
    end
    return ngx.exec("@pyngress_default_backend")
end

-- Whether a request of location profile `profile` can end on an error page: `location /` has the ConfigMap's
-- custom-http-errors, the profile's location its own list (else the ConfigMap's). Only those pages read
-- $pyngress_service_port: other requests skip the write (about 600 instructions).
local function error_pages(profile)
    local own = settings.error_codes[profile]
    return next(settings.custom_http_errors) ~= nil or (own ~= nil and next(own) ~= nil)
end

-- nginx's own 503 page, for a route whose custom-http-errors (its own list) leaves 503 out while the ConfigMap's
-- has it: there ingress-nginx's location-level error_page replaces the http-level one.
local SERVICE_UNAVAILABLE = "<html>\r\n<head><title>503 Service Temporarily Unavailable</title></head>\r\n<body>\r\n"
    .. "<center><h1>503 Service Temporarily Unavailable</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

-- A route whose Service is missing or has no endpoints, without a default-backend that has some: 503, as
-- ingress-nginx's balancer answers it; through the error backend when the route's custom-http-errors (its
-- Ingress's, else the ConfigMap's) list 503. The --default-backend-service is not asked otherwise.
local function unavailable(route)
    local own = settings.error_codes[route.profile]
    local codes = own or settings.custom_http_errors
    if codes[503] then
        return ngx.exec("@pyngress_error_503")
    end
    if own and settings.custom_http_errors[503] then
        ngx.status = 503
        ngx.header["Content-Type"] = "text/html"
        ngx.print(SERVICE_UNAVAILABLE)
        return ngx.exit(503)
    end
    return ngx.exit(503)
end

-- default-backend: the Ingress's own Service answers a route whose Service has no endpoints, told so in
-- ingress-nginx's headers (the request's URI kept, and no X-Original-URI, as ingress-nginx sends it there).
local function tell_default_backend(route)
    local var = ngx.var
    local namespace, name = match(route.ingress or "", "^([^/]*)/(.*)$")
    local set_header = ngx.req.set_header
    set_header("X-Code", "503")
    set_header("X-Format", var.http_accept)
    set_header("X-Namespace", namespace or "")
    set_header("X-Ingress-Name", name or "")
    set_header("X-Service-Name", route.service)
    set_header("X-Service-Port", route.service_port)
end

-- custom-http-errors: the error location of `status` asks the route's default-backend, else the default backend,
-- on "/" (the request's URI is in X-Original-URI); without one, the built-in default backend answers, whatever the
-- status, as ingress-nginx's internal default server answers 404 to everything.
function _M.error_page(status)
    native.forget()  -- the route's choice of endpoint is not for the error backend
    local var = ngx.var
    local backends = store.current("backends")
    -- The route's default-backend annotation first, then --default-backend-service.
    local name = var.pyngress_error_backend
    local peers = name ~= "" and backends[name]
    if not peers or #peers == 0 then
        name, peers = DEFAULT_BACKEND, backends[DEFAULT_BACKEND]
    end
    if not peers or #peers == 0 then
        return ngx.exec("@pyngress_default_backend")
    end
    var.proxy_upstream_name, var.pg_bal = name, name
    var.proxy_alternative_upstream_name = ""
    ngx.req.set_uri("/", false)
end

-- ConfigMap no-tls-redirect-locations (carried by the host's entry): a path under one of these prefixes stays
-- on plain HTTP (by default the ACME HTTP-01 challenge, which must be answered there).
local function tls_redirect_exempt(entry, uri)
    local prefixes = entry.no_tls_redirect
    for i = 1, #prefixes do
        if find(uri, prefixes[i], 1, true) == 1 then
            return true
        end
    end
    return false
end

local function find_host(hosts, host)
    if not host then
        return hosts["_"]
    end
    local entry = hosts[host]
    if entry then
        return entry
    end
    local dot = find(host, ".", 1, true)
    if dot then
        entry = hosts["*" .. sub(host, dot)]
        if entry then
            return entry
        end
        -- Gateway API wildcards further up (entry.deeper: their Gateway rules only), the most specific first.
        dot = find(host, ".", dot + 1, true)
        while dot do
            entry = hosts["*" .. sub(host, dot)]
            if entry and entry.deeper then
                return entry.deeper
            end
            dot = find(host, ".", dot + 1, true)
        end
    end
    return hosts["_"]
end

-- The routes of the host named `name` (a TLS SNI), as the router would find them; nil when none.
function _M.host_entry(name)
    return find_host(store.get("routes"), name and lower(name))
end

-- Whether an Ingress names the host `name` (a TLS SNI) itself or by a wildcard: the routes without a host ("_")
-- do not count, as ingress-nginx's default server does not for ssl-reject-handshake.
function _M.names_host(name)
    if not name then
        return false
    end
    name = lower(name)
    local hosts = store.get("routes")
    if hosts[name] then
        return true
    end
    local dot = find(name, ".", 1, true)
    return dot ~= nil and hosts["*" .. sub(name, dot)] ~= nil
end

-- Whether a request of `route` goes to its canary: a session the affinity cookie ties to the main backend stays
-- there, one it ties to a sticky canary stays there (ingress-nginx's order), else the canary's rules decide.
local function to_canary(route, canary_route)
    if route.affinity then
        local tied = affinity.backend_of(route.affinity)
        if tied then
            if tied == route.backend_key then
                return false
            elseif canary_route.sticky and tied == canary_route.backend_key then
                return true
            end
        end
    end
    return canary.decide(canary_route)
end

-- A request an HTTPRoute rule takes (gateway.lua): its redirect, or its backend chosen by weight; 500 when the rule
-- has no usable backend (an unresolved reference, an unsupported filter), as the Gateway API asks.
-- How long a request may wait for the routes table to name only profiles its nginx.conf defines (see pushed_since).
local PUSH_WAIT_SECONDS = 5
local PUSH_POLL_SECONDS = 0.005
local AGAIN = 0  -- profile_refusal's answer when the request is to be routed again

-- A reload drops the profiles no route uses any more, and the syncer pushes the routes moved off them only once
-- the new workers run: a request that meets its route on a dropped profile in between waits for the next push
-- (tens of milliseconds) rather than being refused. True when one came within the request's PUSH_WAIT_SECONDS.
-- A retiring worker's nginx.conf will never define the new profiles: it does not wait.
local function pushed_since()
    if ngx.worker.exiting() then
        return false
    end
    local ctx = ngx.ctx
    local deadline = ctx.pg_push_deadline
    if not deadline then
        deadline = ngx.now() + PUSH_WAIT_SECONDS
        ctx.pg_push_deadline = deadline
    end
    local seen = store.generation()
    while ngx.now() < deadline do
        ngx.sleep(PUSH_POLL_SECONDS)
        if store.generation() ~= seen then
            return true
        end
    end
    return false
end

-- The status a request of location profile `profile` is refused with before it is served, if any, or AGAIN once
-- the tables changed while it waited; `...` names the route in the log.
local function profile_refusal(profile, ...)
    if not settings.profiles[profile] then
        if pushed_since() then
            return AGAIN
        end
        -- Serving with other settings could skip an access rule.
        ngx.log(ngx.ERR, table.concat({ ... }), " uses location profile ", profile,
                " which this nginx.conf does not define")
        return 503
    end
    -- nginx checks Content-Length when it picks a location; ngx.exec to a named location skips that step.
    -- ($content_length is the header's value: an indexed variable, where $http_content_length would search the
    -- request's headers by name.)
    local limit = settings.body_limits[profile]
    if limit then
        local length = tonumber(ngx.var.content_length)
        if length and length > limit then
            return 413
        end
    end
    return nil
end

-- A Gateway HTTPS listener's client-certificate validation (spec.tls.frontend), checked over TLS before any of the
-- host's Gateway rules serves; true when the request was refused (the connection closed).
local function gateway_refused(entry)
    local auth = entry.gateway_auth
    return auth ~= nil and ngx.var.https == "on" and client_auth.check(auth) == true
end

-- Over TLS, a request whose Host one Gateway HTTPS listener takes and its SNI another answers 421 (gateway.lua,
-- misdirected); a name of an Ingress, on either side, keeps ingress-nginx's behaviour.
local function misdirected(entry, host)
    if (entry and entry.ingress_paths) or ngx.var.https ~= "on" then
        return false
    end
    local sni = ngx.var.ssl_server_name
    if not sni or sni == "" then
        return false
    end
    sni = lower(sni)
    if sni == host then
        return false
    end
    local sni_entry = find_host(store.current("routes"), sni)
    if sni_entry and sni_entry.ingress_paths then
        return false
    end
    local routes = entry and entry.gateway or sni_entry and sni_entry.gateway
    return routes ~= nil and gateway.misdirected(routes, sni, host)
end

-- `port`: the listener port the rule was found for, on a port Gateway listeners have to themselves.
local function serve_gateway(action, uri, prefix, port)
    local var = ngx.var
    var.pyngress_metric = action.metric
    if settings.tracing then
        tracing.start(nil)
    end
    if action.cors and gateway_cors.is_preflight() then
        return gateway_cors.preflight(action.cors)  -- answered here, whatever the backends
    end
    if action.redirect then
        return gateway.redirect(action.redirect, uri, prefix)
    end
    local chosen = gateway.pick(action)
    local redirect = chosen and chosen.filters and chosen.filters.redirect  -- the chosen backendRef's own
    if redirect then
        return gateway.redirect(redirect, uri, prefix)
    end
    local backend = chosen and chosen.backend
    if not backend then
        return ngx.exit(500)
    end
    var.pyngress_metric = chosen.metric
    var.proxy_upstream_name = backend
    local peers = store.current("backends")[backend]
    if not peers or #peers == 0 then
        return ngx.exit(503)
    end
    local refused = profile_refusal(action.profile, "HTTPRoute ", action.route)
    if refused == AGAIN then
        return _M.route(port ~= nil, true)
    elseif refused then
        return ngx.exit(refused)
    end
    gateway.change_request(action, uri, prefix, chosen)
    var.pg_bal = gateway_budget.choice(action.budget, backend)  -- its retry and timeouts, if any
    return ngx.exec(action.location)
end

-- No Ingress path or Gateway rule takes the request: the default backend's answer (traced as its own span).
local function no_route()
    if settings.tracing then
        tracing.start(nil)
    end
    return default_backend()
end

-- The Gateway rule of `entry` that takes `uri` (of those on `port`, when given) answers; false when none takes it.
local function gateway_served(entry, uri, port)
    local action, prefix = gateway.find(entry.gateway, uri, port)
    if not action then
        return false
    end
    if not gateway_refused(entry) then
        serve_gateway(action, uri, prefix, port)
    end
    return true
end

-- On a port a Gateway listener has to itself (nginx.conf.j2's server of those ports): only the Gateway rules of that
-- port (gateway.lua compares it), found as on the controller's ports, never an Ingress path; else the default backend.
local function route_own_port(entry, uri)
    if entry and entry.gateway and gateway_served(entry, uri, tonumber(ngx.var.server_port)) then
        return
    end
    return no_route()
end

-- `own_port`: true in the server of the ports Gateway listeners have to themselves.
-- `again`: the request waited for a push (profile_refusal) and is routed once more; its id stays (and its trace:
-- tracing.start() starts one per request).
function _M.route(own_port, again)
    local var = ngx.var
    if settings.generate_request_id and not again then
        -- First: every answer below (404, redirects, 413) is logged with its id.
        variables.set_request_id(request_id.new())
    end
    -- Only HTTP/1.0 may come without a Host header (nginx refuses HTTP/1.1 without one, HTTP/2 has :authority).
    local version = ngx.req.http_version()
    if version and version < 1.1 and var.pyngress_best_http_host == "" then
        var.pyngress_best_http_host = var.host
    end
    local host = variables.host()
    store.refresh()
    local entry = find_host(store.current("routes"), host)
    if own_port then
        return route_own_port(entry, variables.uri())
    end
    if misdirected(entry, host) then
        return ngx.exit(421)
    end
    if not entry then
        return no_route()
    end
    local uri = variables.uri()
    if entry.redirect_host then
        -- from-to-www-redirect: the other spelling of a host; scheme, port and URI kept.
        var.pyngress_metric = entry.metric
        local port = match(var.http_host or "", ":%d+$") or ""
        return ngx.redirect(var.scheme .. "://" .. entry.redirect_host .. port .. var.request_uri,
                            entry.redirect_code)
    end
    if entry.gateway and gateway_served(entry, uri) then
        return
    end
    -- The route first, so that the redirects below are counted for its Ingress (as ingress-nginx counts them).
    local route, captures = entry.exact[uri], nil
    if not route then
        if entry.regex then
            route, captures = rewrite.match(entry.regex, uri)
        else
            route = match_prefix(entry, uri)
        end
        route = route or entry.default
    end
    variables.set_metric(route and route.metric or entry.metric)
    if settings.tracing then
        tracing.start(route, route and route.path)  -- before the redirects below, so that they are traced too
    end
    -- Each variable read costs a few hundred nanoseconds outside the JIT: the scheme only when the host needs it.
    if entry.hsts or entry.tls or entry.force_ssl_redirect then
        local scheme = variables.scheme()
        if scheme == "https" and entry.hsts then
            variables.set_hsts(entry.hsts)
        end
        if settings.forwarded_scheme then
            -- As ingress-nginx: the scheme the load balancer says the client used (X-Forwarded-Proto, or HTTPS
            -- when its PROXY header names port 443) decides.
            scheme = var.pyngress_forwarded_proto
        end
        if scheme == "http" and (entry.force_ssl_redirect or (entry.tls and entry.ssl_redirect))
                and not tls_redirect_exempt(entry, uri) then
            -- As ingress-nginx: a trailing slash is dropped unless the route's preserve-trailing-slash keeps it.
            local request_uri = var.request_uri
            if not (route and route.preserve_trailing_slash) and byte(request_uri, -1) == SLASH then
                request_uri = sub(request_uri, 1, -2)
            end
            -- ingress-nginx's host: the Host header (with use-forwarded-headers, the first host of X-Forwarded-Host)
            -- without its port; the HTTPS port only with the route's use-port-in-redirects.
            local to_host = var.pyngress_forwarded_host
            to_host = match(to_host, "^(.*):%d+$") or to_host
            local port = route and route.port_in_redirects and (":" .. settings.https_port) or ""
            return ngx.redirect("https://" .. to_host .. port .. request_uri, entry.redirect_code)
        end
    end
    if entry.app_root and uri == "/" then
        return ngx.redirect(var.scheme .. "://" .. (var.http_host or host) .. entry.app_root, 302)
    end
    if not route then
        return default_backend()
    end
    if route.client_auth and client_auth.check(route.client_auth) then
        return  -- the certificate was refused: the request is answered
    end
    local backend = route.backend
    local canary_route = route.canary
    local unsticky = false  -- the canary serves this request without the affinity cookie (legacy)
    if canary_route and to_canary(route, canary_route) then
        -- The balancer takes the alternative (canary) backend; $proxy_upstream_name stays the main one.
        backend = canary_route.backend
        var.proxy_alternative_upstream_name = backend
        var.pyngress_metric = route.metric_canary
        unsticky = not canary_route.sticky
    end
    variables.set_upstream_name(route.backend or "-")
    if error_pages(route.profile) then
        var.pyngress_service_port = route.service_port  -- X-Service-Port of its error pages
    end
    local fallback = route.default_backend
    if fallback then
        var.pyngress_error_backend = fallback  -- custom-http-errors' pages come from it too
    end
    local backends = store.current("backends")
    local peers = backend and backends[backend]
    if not peers or #peers == 0 then
        -- default-backend: the Ingress's own Service answers while the route's has no endpoints.
        peers = fallback and backends[fallback]
        if not peers or #peers == 0 then
            return unavailable(route)
        end
        backend = fallback
        var.proxy_upstream_name, var.proxy_alternative_upstream_name = fallback, ""
        tell_default_backend(route)
    end
    local refused = profile_refusal(route.profile, "route for ", host, uri)
    if refused == AGAIN then
        return _M.route(false, true)
    elseif refused then
        return ngx.exit(refused)
    end
    -- The endpoint, when the route picks it here.
    local index, affine
    if route.affinity and not unsticky then
        index, affine = affinity.pick(route.affinity, peers, backend), true
    elseif route.hash_by then
        index = hashing.pick(route.hash_by, peers, route.hash_subset_size)
    elseif route.ewma then
        index = ewma.pick(peers)
    end
    -- pyngress's nginx module balances the request (nginx-module/pyngress_balancer.c), except one a session affinity
    -- keeps: when its endpoint fails, balancer.lua moves the session and its cookie.
    if affine or not native.balance(peers.native, index or 0) then
        var.pg_bal = index and ("#" .. index .. " " .. backend) or backend
    end
    if route.rewrite then
        -- The query string stays as the client sent it (set_uri leaves the arguments alone).
        local target = rewrite.target(route.rewrite, captures)
        if route.rewrite_log then
            ngx.log(ngx.NOTICE, "rewrite-target of ", route.ingress, ": \"", uri, "\" -> \"", target, "\"")
        end
        ngx.req.set_uri(target, false)
    end
    local http2_location = settings.http2_locations[route.profile]
    if http2_location and var.http2 ~= "" then
        return ngx.exec(http2_location)
    end
    return ngx.exec(route.location)
end

return _M
