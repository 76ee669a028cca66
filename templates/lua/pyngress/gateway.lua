--[==[
Gateway API rules of a host: the routes table's "gateway" field (services/syncer/model/gateway/tables.py writes it,
table_schema.GATEWAY_ROUTES declares it), tried by router.lua before the host's Ingress paths.

    "gateway": {"layers": [<layer>, ...], "actions": [<action>, ...],
                "client_auth": <client_auth.lua config> (optional: the HTTPS listener's client-certificate validation,
                               which router.lua checks over TLS before a rule serves)}
    <layer> = {"exact": {"<path>": [<match>, ...]}, "prefix": [["<path>", [<match>, ...]], ...] (longest first),
               "regex": [["<PCRE>", [<match>, ...]], ...]}
    <match> = {"action": <1-based index into actions>, "scheme": "http" | "https", "port": <own port>, "method": "GET",
               "headers": [{"name": "<lower case>", "value": "...", "regex": true}], "query": [...]}
    <action> = {"route": "ns/name", "path": "<first path, the metrics' label>", "profile": "<profile>",
                "backends": [{"backend": "<name>" | null, "weight": n, "service": "<name>", "filters": <filters>}],
                "redirect": {"scheme", "hostname", "port", "path", "prefix", "code"},
                "rewrite_host", "rewrite_path", "rewrite_prefix", "request_headers", "response_headers",
                "mirrors": [{"backend": "<name>", "numerator": n, "denominator": d}], "cors": <gateway_cors.lua>}
    <filters> = {"redirect", "rewrite_host", "rewrite_path", "rewrite_prefix", "request_headers", "response_headers"}
                (a backendRef's own: applied after the rule's, to the requests that backend gets)
    header changes = {"set": [[name, value]], "add": [[name, value]], "remove": [name]}

The layers are tried in order (the host's own routes, then wildcard hosts, then routes for any host). In a layer the
candidate paths are the exact path, then the regular expressions (whole path) in order, then each prefix ending at
a path element boundary, longest first; a path's matches are in the spec's precedence order, and when none of them
holds the next candidate path is tried. A request no match takes is left to the Ingress paths.

A match with a "port" is its listener's on a port of its own (listeners.py): it holds only for a request that came on
that port (router.lua passes it), and a match without one only on the controller's HTTP and HTTPS ports.
]==]
local monitor = require("pyngress.monitor")
local gateway_cors = require("pyngress.gateway_cors")
local gateway_budget = require("pyngress.gateway_budget")
local store = require("pyngress.store")
local cjson = require("cjson.safe")

local byte, sub, find, lower, concat = string.byte, string.sub, string.find, string.lower, table.concat
local re_find = ngx.re.find
local random = math.random
local null = cjson.null
local SLASH = 47
local MAX_HEADERS = 100  -- of the request's headers and query arguments, read for conditions and appends

local _M = {}

local function fail(where, what)
    error(where .. ": " .. what, 0)
end

local function list_of(raw, where)
    if raw == nil or raw == null then
        return {}
    end
    if type(raw) ~= "table" then
        fail(where, "must be a list")
    end
    return raw
end

local function string_of(raw, where)
    if type(raw) ~= "string" then
        fail(where, "must be a string")
    end
    return raw
end

local function optional_string(raw)
    return type(raw) == "string" and raw or nil
end

local function check_regex(pattern, where)
    local _, _, err = re_find("", pattern, "jo")
    if err then
        fail(where, "bad regular expression: " .. err)
    end
    return pattern
end

local function value_matches_of(raw, where)
    local found = {}
    for i, item in ipairs(list_of(raw, where)) do
        if type(item) ~= "table" then
            fail(where, "a condition must be an object")
        end
        local regex = item.regex == true
        local value = string_of(item.value, where .. " value")
        found[i] = { name = string_of(item.name, where .. " name"), regex = regex,
                     value = regex and check_regex(value, where) or value }
    end
    return #found > 0 and found or nil
end

local function match_of(raw, where, actions)
    if type(raw) ~= "table" then
        fail(where, "a match must be an object")
    end
    local action = actions[raw.action]
    if not action then
        fail(where, "action must be the index of one of the host's actions")
    end
    local scheme = raw.scheme
    local port = raw.port
    if port ~= nil and port ~= null and (type(port) ~= "number" or port % 1 ~= 0 or port < 1 or port > 65535) then
        fail(where, "port must be a port number")
    end
    return { action = action, scheme = (scheme == "http" or scheme == "https") and scheme or nil,
             port = port ~= null and port or nil,
             method = optional_string(raw.method), headers = value_matches_of(raw.headers, where .. " headers"),
             query = value_matches_of(raw.query, where .. " query") }
end

local function matches_of(raw, where, actions)
    local found = {}
    for i, item in ipairs(list_of(raw, where)) do
        found[i] = match_of(item, where, actions)
    end
    return found
end

local function pairs_of(raw, where)
    local found = {}
    for i, pair in ipairs(list_of(raw, where)) do
        if type(pair) ~= "table" then
            fail(where, "must be a list of [name, value]")
        end
        found[i] = { string_of(pair[1], where), string_of(pair[2], where) }
    end
    return found
end

local function changes_of(raw, where)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" then
        fail(where, "must be an object")
    end
    local remove = list_of(raw.remove, where .. " remove")
    for _, name in ipairs(remove) do
        string_of(name, where .. " remove")
    end
    return { set = pairs_of(raw.set, where .. " set"), add = pairs_of(raw.add, where .. " add"), remove = remove }
end

local function redirect_of(raw, where)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" then
        fail(where, "redirect must be an object")
    end
    local code = tonumber(raw.code)
    if code ~= 301 and code ~= 302 and code ~= 303 and code ~= 307 and code ~= 308 then
        fail(where, "redirect code must be 301, 302, 303, 307 or 308")
    end
    return { scheme = optional_string(raw.scheme), hostname = optional_string(raw.hostname), port = tonumber(raw.port),
             path = optional_string(raw.path), prefix = raw.prefix == true, code = code }
end

-- RequestMirror: copy i of a request goes to the profile's mirror location i (nginx.conf.j2), to mirrors[i].
local MIRROR_LOCATION = "/_pyngress_gateway_mirror/"

local function mirrors_of(raw, where)
    local found = {}
    for i, item in ipairs(list_of(raw, where)) do
        if type(item) ~= "table" then
            fail(where, "a mirror must be an object")
        end
        local numerator, denominator = tonumber(item.numerator) or 100, tonumber(item.denominator) or 100
        if denominator < 1 then
            fail(where, "a mirror's denominator must be at least 1")
        end
        found[i] = { backend = string_of(item.backend, where .. " backend"), share = numerator / denominator }
    end
    return #found > 0 and found or nil
end

-- What a rule's action and a backendRef's filters both hold: redirect, rewrites, header changes.
local function filters_of(raw, where)
    return { redirect = redirect_of(raw.redirect, where), rewrite_host = optional_string(raw.rewrite_host),
             rewrite_path = optional_string(raw.rewrite_path), rewrite_prefix = raw.rewrite_prefix == true,
             request_headers = changes_of(raw.request_headers, where .. " request_headers"),
             response_headers = changes_of(raw.response_headers, where .. " response_headers") }
end

local function backend_filters_of(raw, where)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" then
        fail(where, "a backend's filters must be an object")
    end
    return filters_of(raw, where)
end

local function strings_of(raw, where)
    local found = list_of(raw, where)
    for i = 1, #found do
        string_of(found[i], where)
    end
    return found
end

local function cors_of(raw, where)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" then
        fail(where, "cors must be an object")
    end
    local origins = {}
    for i, item in ipairs(list_of(raw.origins, where .. " origins")) do
        if type(item) ~= "table" or (item.scheme ~= "http" and item.scheme ~= "https") then
            fail(where, "an origin must be an object with scheme http or https")
        end
        origins[i] = { scheme = item.scheme, host = string_of(item.host, where .. " origin host"),
                       port = tonumber(item.port) or fail(where, "an origin needs a port") }
    end
    return gateway_cors.prepare({
        any_origin = raw.any_origin == true, origins = origins, credentials = raw.credentials == true,
        methods = strings_of(raw.methods, where .. " methods"), headers = strings_of(raw.headers, where .. " headers"),
        expose = strings_of(raw.expose, where .. " expose"),
        max_age = tostring(tonumber(raw.max_age) or fail(where, "cors needs max_age")) })
end

local function action_of(raw, host, where)
    if type(raw) ~= "table" then
        fail(where, "an action must be an object")
    end
    local route = string_of(raw.route, where .. " route")
    local path = string_of(raw.path, where .. " path")
    local profile = optional_string(raw.profile) or "default"
    local backends, total = {}, 0
    for i, item in ipairs(list_of(raw.backends, where .. " backends")) do
        if type(item) ~= "table" then
            fail(where, "a backend must be an object")
        end
        local backend = optional_string(item.backend)
        local weight = tonumber(item.weight) or 0
        backends[i] = { backend = backend or false, weight = weight,
                        filters = backend_filters_of(item.filters, where .. " backend " .. i),
                        metric = monitor.labels_of(host, route, optional_string(item.service), path) }
        total = total + weight
    end
    local action = filters_of(raw, where)
    action.route, action.profile, action.location = route, profile, "@profile_" .. profile
    action.backends, action.total_weight = backends, total
    action.response_headers_json = action.response_headers and cjson.encode({ action.response_headers })
    action.mirrors = mirrors_of(raw.mirrors, where .. " mirrors")
    action.cors = cors_of(raw.cors, where .. " cors")
    action.budget = gateway_budget.budget_of(raw.budget, where .. " budget")
    action.metric = monitor.labels_of(host, route, nil, path)
    return action
end

local function layer_of(raw, where, actions)
    if type(raw) ~= "table" then
        fail(where, "a layer must be an object")
    end
    local layer = { exact = {}, prefix = {}, longest_prefix = 0, regex = nil }
    local exact = raw.exact
    if exact ~= nil and exact ~= null then
        if type(exact) ~= "table" then
            fail(where, "exact must be an object")
        end
        for path, list in pairs(exact) do
            layer.exact[string_of(path, where)] = matches_of(list, where .. " " .. path, actions)
        end
    end
    for _, pair in ipairs(list_of(raw.prefix, where .. " prefix")) do
        local path = string_of(type(pair) == "table" and pair[1], where .. " prefix")
        if byte(path, 1) ~= SLASH then
            fail(where, "a prefix must start with /")
        end
        layer.prefix[path] = matches_of(pair[2], where .. " " .. path, actions)
        if #path > layer.longest_prefix then
            layer.longest_prefix = #path
        end
    end
    local regexes = {}
    for i, pair in ipairs(list_of(raw.regex, where .. " regex")) do
        local pattern = string_of(type(pair) == "table" and pair[1], where .. " regex")
        regexes[i] = { pattern = check_regex("^(?:" .. pattern .. ")$", where), matches = matches_of(pair[2], where, actions) }
    end
    layer.regex = #regexes > 0 and regexes or nil
    return layer
end

-- "https_listeners": exact names, wildcard suffixes (".example.com", longest first) and whether one takes any host.
local function listeners_of(raw, where)
    local names = strings_of(raw, where)
    if #names == 0 then
        return nil
    end
    local found = { exact = {}, wildcards = {}, any = false }
    for _, name in ipairs(names) do
        if name == "" then
            found.any = true
        elseif sub(name, 1, 2) == "*." then
            found.wildcards[#found.wildcards + 1] = sub(name, 2)
        else
            found.exact[name] = true
        end
    end
    table.sort(found.wildcards, function(a, b) return #a > #b end)
    return found
end

-- A host's "gateway" entry as the router keeps it, or nil; raises an error naming what is wrong.
function _M.routes_of(raw, host)
    if raw == nil or raw == null then
        return nil
    end
    if type(raw) ~= "table" then
        fail(host, "gateway must be an object")
    end
    local actions = {}
    for i, action in ipairs(list_of(raw.actions, host .. " gateway actions")) do
        actions[i] = action_of(action, host, host .. " gateway action " .. i)
    end
    local layers = {}
    for i, layer in ipairs(list_of(raw.layers, host .. " gateway layers")) do
        layers[i] = layer_of(layer, host .. " gateway layer " .. i, actions)
    end
    return { layers = layers, https_listeners = listeners_of(raw.https_listeners, host .. " https_listeners") }
end

-- The hostname of the HTTPS listener that takes `name` (its own name, then the longest wildcard, then "" for one
-- without a hostname), or nil when none does.
local function listener_of(listeners, name)
    if listeners.exact[name] then
        return name
    end
    local wildcards = listeners.wildcards
    for i = 1, #wildcards do
        local suffix = wildcards[i]
        if #name > #suffix and sub(name, -#suffix) == suffix then
            return "*" .. suffix
        end
    end
    return listeners.any and "" or nil
end

-- Whether a request for `host` over a TLS connection whose SNI was `sni` (both lower case) is misdirected: another
-- HTTPS listener takes each (HTTPRouteHTTPSListenerDetectMisdirectedRequests), as an HTTP/2 client reusing a
-- connection opened for another name can send; `routes`: the "gateway" entry of either name.
function _M.misdirected(routes, sni, host)
    local listeners = routes.https_listeners
    if not listeners then
        return false
    end
    local chosen, wanted = listener_of(listeners, sni), listener_of(listeners, host)
    return chosen ~= nil and wanted ~= nil and chosen ~= wanted
end

-- A header or argument's value as one string (repeated ones joined with ","; an argument without "=" is "").
local function one_value(value)
    if type(value) == "table" then
        for i = 1, #value do
            if value[i] == true then
                value[i] = ""
            end
        end
        return concat(value, ",")
    end
    return value == true and "" or value
end

local function values_hold(conditions, values)
    for i = 1, #conditions do
        local condition = conditions[i]
        local value = values[condition.name]
        if value == nil then
            return false
        end
        value = one_value(value)
        if condition.regex then
            if not re_find(value, condition.value, "jo") then
                return false
            end
        elseif value ~= condition.value then
            return false
        end
    end
    return true
end

-- `state` keeps what one request's conditions read, each read once.
local function holds(match, state)
    if match.port ~= state.port then
        return false  -- another port's listener's, or one of the controller's ports' on a port of its own
    end
    local scheme = match.scheme
    if scheme then
        state.scheme = state.scheme or ngx.var.scheme
        if state.scheme ~= scheme then
            return false
        end
    end
    local method = match.method
    if method then
        state.method = state.method or ngx.req.get_method()
        if state.method ~= method then
            return false
        end
    end
    local headers = match.headers
    if headers then
        state.headers = state.headers or ngx.req.get_headers(MAX_HEADERS)
        if not values_hold(headers, state.headers) then
            return false
        end
    end
    local query = match.query
    if query then
        state.args = state.args or ngx.req.get_uri_args(MAX_HEADERS)
        if not values_hold(query, state.args) then
            return false
        end
    end
    return true
end

local function first_holding(matches, state)
    for i = 1, #matches do
        local match = matches[i]
        if holds(match, state) then
            return match.action
        end
    end
    return nil
end

local function find_in_layer(layer, uri, state)
    local matches = layer.exact[uri]
    local action = matches and first_holding(matches, state)
    if action then
        return action, uri
    end
    local regexes = layer.regex
    if regexes then
        for i = 1, #regexes do
            local regex = regexes[i]
            if re_find(uri, regex.pattern, "jo") then
                action = first_holding(regex.matches, state)
                if action then
                    return action, nil
                end
            end
        end
    end
    local longest = layer.longest_prefix
    if longest == 0 then
        return nil
    end
    local prefixes = layer.prefix
    local len = #uri
    if len <= longest and uri ~= "/" then
        matches = prefixes[uri]
        action = matches and first_holding(matches, state)
        if action then
            return action, uri
        end
    end
    -- Then each shorter prefix ending where a path element ends, down to "/".
    local i = len < longest + 1 and len or longest + 1
    while i > 1 do
        if byte(uri, i) == SLASH then
            local prefix = sub(uri, 1, i - 1)
            matches = prefixes[prefix]
            action = matches and first_holding(matches, state)
            if action then
                return action, prefix
            end
        end
        i = i - 1
    end
    matches = prefixes["/"]
    action = matches and first_holding(matches, state)
    if action then
        return action, "/"
    end
    return nil
end

-- The action of the first match that takes a request for `uri`, and the path prefix it matched (ReplacePrefixMatch
-- replaces it); nil when none does. `port`: the port of a request that came on a listener's own port, else nil.
function _M.find(routes, uri, port)
    local state = { port = port }
    local layers = routes.layers
    for i = 1, #layers do
        local action, prefix = find_in_layer(layers[i], uri, state)
        if action then
            return action, prefix
        end
    end
    return nil
end

-- The backend entry a request of `action` goes to, chosen by weight; nil when it must answer 500 (no backend, all
-- weights 0). An entry's backend is false for a reference that could not be resolved: 500 too.
function _M.pick(action)
    local backends = action.backends
    local count = #backends
    local total = action.total_weight
    if count == 0 or total <= 0 then
        return nil
    end
    if count == 1 then
        return backends[1]
    end
    local left = random() * total
    for i = 1, count do
        local entry = backends[i]
        left = left - entry.weight
        if left < 0 then
            return entry
        end
    end
    return backends[count]
end

-- `uri` with `prefix` (the prefix match it took) replaced by `replacement`, on path element boundaries.
function _M.replace_prefix(uri, prefix, replacement)
    local rest = prefix == "/" and uri or sub(uri, #prefix + 1)
    if rest == "" or rest == "/" and prefix == "/" then
        return replacement
    end
    if byte(replacement, -1) == SLASH then
        replacement = sub(replacement, 1, -2)
    end
    return replacement .. rest
end

-- RequestRedirect: scheme, host, port and path as the filter says, the rest as the request had them; the port is
-- left out when it is the scheme's own.
function _M.redirect(redirect, uri, prefix)
    local var = ngx.var
    local scheme = redirect.scheme or var.scheme
    local host = redirect.hostname or var.host
    local port = redirect.port
    if not port then
        -- The spec: the scheme's well-known port when the filter names a scheme, else the listener's.
        port = redirect.scheme and (scheme == "https" and 443 or 80) or tonumber(var.pyngress_server_port)
    end
    local request_uri = var.request_uri
    local question = find(request_uri, "?", 1, true)
    local path = question and sub(request_uri, 1, question - 1) or request_uri
    local args = question and sub(request_uri, question) or ""
    if redirect.path then
        path = redirect.prefix and prefix and _M.replace_prefix(uri, prefix, redirect.path) or redirect.path
    end
    local default_port = scheme == "https" and 443 or 80
    local authority = port == default_port and host or (host .. ":" .. port)
    return ngx.redirect(scheme .. "://" .. authority .. path .. args, redirect.code)
end

-- `join`: an added value joins the existing ones in one header, "a,b" (requests); else it is one more header line
-- (responses, where Set-Cookie must not be joined).
local function apply_changes(changes, set, current, clear, join)
    local all = changes.set
    for i = 1, #all do
        set(all[i][1], all[i][2])
    end
    all = changes.add
    for i = 1, #all do
        local name, value = all[i][1], all[i][2]
        local existing = current(name)
        if existing == nil then
            set(name, value)
        elseif join then
            set(name, one_value(existing) .. "," .. value)
        elseif type(existing) == "table" then
            local values = { unpack(existing) }
            values[#values + 1] = value
            set(name, values)
        else
            set(name, { existing, value })
        end
    end
    all = changes.remove
    for i = 1, #all do
        clear(all[i])
    end
end

local function request_header(name)
    return ngx.req.get_headers(MAX_HEADERS)[lower(name)]
end

-- Request headers, Host and path as a rule's or a backendRef's filters change them (`uri` and `prefix`: as the
-- request came, what ReplacePrefixMatch replaces).
local function change_with(filters, uri, prefix)
    local changes = filters.request_headers
    if changes then
        apply_changes(changes, ngx.req.set_header, request_header, ngx.req.clear_header, true)
    end
    if filters.rewrite_host then
        ngx.var.pyngress_best_http_host = filters.rewrite_host  -- the Host header the backend gets
    end
    local path = filters.rewrite_path
    if path then
        if filters.rewrite_prefix and prefix then
            path = _M.replace_prefix(uri, prefix, path)
        end
        ngx.req.set_uri(path, false)
    end
end

-- What the action, then the filters of its `chosen` backend, change in the request before it is proxied: headers,
-- Host, path; and the response headers to change later (response_headers, from the header filter of the action's
-- location profile), the CORS headers last.
function _M.change_request(action, uri, prefix, chosen)
    change_with(action, uri, prefix)
    local backend_filters = chosen and chosen.filters
    if backend_filters then
        change_with(backend_filters, uri, prefix)
    end
    local mirrors = action.mirrors
    if mirrors then
        -- The backend of each copy, "-" for a copy this request does not make (the rule's percentage); the mirror
        -- locations read it: a subrequest shares its request's variables.
        local chosen = {}
        for i = 1, #mirrors do
            local mirror = mirrors[i]
            chosen[i] = (mirror.share >= 1 or random() < mirror.share) and mirror.backend or "-"
        end
        ngx.var.pyngress_gateway_mirrors = concat(chosen, " ")
    end
    local response = action.response_headers_json
    local backend_changes = backend_filters and backend_filters.response_headers
    local cors_changes = action.cors and gateway_cors.response_changes(action.cors)
    if backend_changes or cors_changes then
        local all = { action.response_headers, backend_changes, cors_changes }
        local present = {}
        for i = 1, 3 do
            present[#present + 1] = all[i]
        end
        response = cjson.encode(present)
    end
    if response then
        -- For the header filter of the action's profile: a variable survives the jump to that location, ngx.ctx not.
        ngx.var.pyngress_gateway_response = response
    end
end

local function set_response_header(name, value)
    ngx.header[name] = value
end

local function response_header(name)
    return ngx.header[name]
end

local function clear_response_header(name)
    ngx.header[name] = nil
end

-- ResponseHeaderModifier (the rule's, then the chosen backend's) and CORS, in the header filter of the location
-- profile their rules use: a list of header changes, applied in order.
function _M.response_headers()
    local encoded = ngx.var.pyngress_gateway_response
    local all = encoded and encoded ~= "" and cjson.decode(encoded)
    if all then
        for i = 1, #all do
            apply_changes(all[i], set_response_header, response_header, clear_response_header, false)
        end
    end
end

-- In mirror location i (a background subrequest of the mirror module): the backend the router chose for copy i, for
-- the balancer of upstream pyngress_gateway_mirror; a copy not chosen, or without endpoints, is not sent.
function _M.mirror()
    local index = tonumber(sub(ngx.var.uri, #MIRROR_LOCATION + 1))
    local chosen = ngx.var.pyngress_gateway_mirrors or ""
    local backend
    local i = 0
    for word in string.gmatch(chosen, "%S+") do
        i = i + 1
        if i == index then
            backend = word
            break
        end
    end
    if not backend or backend == "-" then
        return ngx.exit(204)
    end
    local peers = store.current("backends")[backend]
    if not peers or #peers == 0 then
        return ngx.exit(503)
    end
    ngx.ctx.pyngress_mirror = backend
end

return _M
