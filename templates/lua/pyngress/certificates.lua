--[[
Serves the certificate for each TLS handshake's SNI (ssl_certificate_by_lua), so that certificates are
added and rotated without a reload.

The certificates table (POST /configuration/certificates):

    {"certs": {"<cert-id>": {"cert": "<PEM certificate chain>", "key": "<PEM private key>"}, ...},
     "hosts": {"<host>": "<cert-id>", "*.example.com": "<cert-id>", ...},
     "default": "<cert-id>" | null}

When the SNI's host (found as the router finds it) has routes with client authentication, the handshake
asks the client for a certificate (client_auth.lua).

Lookup: the SNI name (lowercased) exactly, else the wildcard entry for its parent ("*.example.com" for
"a.example.com"), else "default", else nginx's static ssl_certificate (the fake certificate).

Each certificate is checked when pushed (its chain and key parse, the key is the certificate's): one that is
not right is refused alone ("certs/<id>"), and the last good one of that id keeps serving; a host (or
"default") naming a certificate nginx does not hold is refused too ("hosts/<host>"), and is served as if it
had no entry (until a certificate of that id comes). Only a certificate whose PEMs changed is parsed again.

A change takes POST /configuration/certificates/delta (store.lua), its keys those of the refusals: "certs/<id>"
(a {cert, key} pair), "hosts/<host>" (a certificate id) and "default" (an id or null), set or deleted. One
certificate of 10,000 changed moves that certificate, not the 25 MB of all of them.

In the shared dictionary each certificate is kept under its own keys ("cert:<id>", "key:<id>") beside
an index ({hosts, default, digests: id -> md5 of cert and key}), so that a worker decodes only the small
index when the table changes and parses a certificate when a handshake first needs it.

Memory stays bounded at any number of certificates: the PEMs live once, in the shared dictionary (64 MiB,
SHARED_DICT_SIZE in services/nginxconf/render.py, about 10 MiB for 10,000 EC certificates; a push that does not
fit is refused), and each worker keeps at most PARSED_MAX parsed certificates (an LRU): past that, the least
recently served is dropped (OpenSSL frees it with its cdata) and parsed again from the dictionary when next
asked for. An entry is used only while its digest is the index's, so a rotated certificate is never served
stale; one that left the index is no longer asked for and ages out.
]]
local ffi = require("ffi")
local lrucache = require("resty.lrucache")
local ssl = require("ngx.ssl")
local cjson = require("cjson.safe")
local store = require("pyngress.store")
local router = require("pyngress.router")
local settings = require("pyngress.settings")
local ocsp_stapling = require("pyngress.ocsp_stapling")
local client_auth = require("pyngress.client_auth")  -- also declares ERR_clear_error, used here

local C = ffi.C
local find, sub, lower, match = string.find, string.sub, string.lower, string.match
local null = cjson.null

ffi.cdef [[
void *OPENSSL_sk_value(const void *stack, int i);
int X509_check_private_key(const void *x509, const void *pkey);
]]

local _M = {}

local function load(dict)
    local text = dict:get("index")
    local index = text and cjson.decode(text)
    if not index then
        return { hosts = {}, digests = {} }
    end
    if index.default == null then
        index.default = nil
    end
    return index
end

-- The digest of certificate `id` ({"cert": PEM chain, "key": PEM}); error(message) when OpenSSL cannot use it.
-- `held`: the digests of the certificates nginx holds, which were checked when they came.
local function checked_digest(id, pair, held)
    if type(pair) ~= "table" or type(pair.cert) ~= "string" or type(pair.key) ~= "string" then
        error('must be {"cert": PEM, "key": PEM}', 0)
    end
    local digest = ngx.md5(pair.cert .. "\n" .. pair.key)
    if held[id] == digest then
        return digest
    end
    local chain, err = ssl.parse_pem_cert(pair.cert)
    if not chain then
        error("the certificate does not parse: " .. tostring(err), 0)
    end
    local key
    key, err = ssl.parse_pem_priv_key(pair.key)
    if not key then
        error("the private key does not parse: " .. tostring(err), 0)
    end
    local matches = C.X509_check_private_key(C.OPENSSL_sk_value(chain, 0), key) == 1
    C.ERR_clear_error()
    if not matches then
        error("the private key is not the certificate's", 0)
    end
    return digest
end

-- Why the entry at `where` is refused when certificate `id` is not held; nil when it is.
local function not_held(index, id, where)
    if type(id) == "string" and index.digests[id] then
        return nil
    end
    return where .. " names certificate " .. tostring(id) .. ", which nginx does not hold"
end

-- Each host of `hosts` ({host: id}) pointed at its certificate in `index`, as pushed; `refused` says which name one
-- nginx does not hold.
local function name_hosts(index, hosts, refused)
    for host, id in pairs(hosts) do
        index.hosts[lower(host)] = id
        refused["hosts/" .. host] = not_held(index, id, "hosts/" .. host)
    end
end

-- The index of `data` (see put); `dict` holds the last good certificates (nil: none).
local function build(data, dict)
    local certs, hosts, default = data.certs, data.hosts, data.default
    if certs == nil or certs == null then
        certs = {}
    end
    if hosts == nil or hosts == null then
        hosts = {}
    end
    if default == null then
        default = nil
    end
    if type(certs) ~= "table" or type(hosts) ~= "table" then
        error('"certs" and "hosts" must be objects', 0)
    end
    local held = dict and load(dict).digests or {}
    local index = { hosts = {}, digests = {} }
    local refused = {}
    for id, pair in pairs(certs) do
        local ok, digest = pcall(checked_digest, id, pair, held)
        if ok then
            index.digests[id] = digest
        else
            refused["certs/" .. id] = "certificate " .. id .. ": " .. tostring(digest)
            index.digests[id] = held[id]  -- the last good one keeps serving
        end
    end
    -- Kept as pushed, refused or not: the certificate a host names may come with a later change.
    name_hosts(index, hosts, refused)
    if default ~= nil then
        index.default = default
        refused.default = not_held(index, default, "default")
    end
    return index, next(refused) and refused or nil
end

-- A certificate's PEMs under its own keys; nil and why when the dictionary refuses one.
local function store_pair(dict, id, pair)
    local ok, err = dict:safe_set("cert:" .. id, pair.cert)
    if ok then
        ok, err = dict:safe_set("key:" .. id, pair.key)
    end
    return ok, err
end

-- The index published, then the PEMs of the ids of `gone` it no longer lists removed (a worker still on the old
-- index falls back for one handshake).
local function publish(dict, index, gone)
    local ok, err = dict:safe_set("index", cjson.encode(index))
    if not ok then
        return nil, err
    end
    for id in pairs(gone) do
        if not index.digests[id] then
            dict:delete("cert:" .. id)
            dict:delete("key:" .. id)
        end
    end
    return true
end

-- Each certificate under its own keys, those refused left as they were (their last good PEMs), then the index.
local function put(dict, _, data, index, refused)
    local old = dict:get("index")
    for id, pair in pairs(data.certs or {}) do
        if not (refused and refused["certs/" .. id]) then
            local ok, err = store_pair(dict, id, pair)
            if not ok then
                return nil, err
            end
        end
    end
    local previous = old and cjson.decode(old)
    return publish(dict, index, previous and previous.digests or {})
end

-- Each certificate of `set` ({id: pair}) checked and kept under its own keys, unless refused (why, into `refused`).
local function keep_certificates(dict, index, set, refused)
    for id, pair in pairs(set) do
        local ok, digest = pcall(checked_digest, id, pair, index.digests)
        if not ok then
            refused["certs/" .. id] = "certificate " .. id .. ": " .. tostring(digest)
        elseif digest ~= index.digests[id] then
            local stored, err = store_pair(dict, id, pair)
            if not stored then
                return nil, err
            end
            index.digests[id] = digest
        end
    end
    return true
end

-- A change (store.put_delta): `set` {key: value} and `delete` [key], keys "certs/<id>", "hosts/<host>" or "default";
-- `refused` (key -> message, the table's) is brought up to date. The hosts naming a certificate that came or went are
-- looked at again; nil, message when the dictionary cannot keep it.
local function change(dict, set, delete, refused)
    local index = load(dict)
    local certs, hosts, gone, was_held = {}, {}, {}, {}
    for key, value in pairs(set) do
        refused[key] = nil
        local kind, name = match(key, "^(%a+)/(.+)$")
        if kind == "certs" then
            certs[name], was_held[name] = value, index.digests[name] ~= nil
        elseif kind == "hosts" then
            hosts[name] = value
        elseif key == "default" then
            index.default = value ~= null and value or nil
            refused.default = index.default and not_held(index, index.default, "default")
        else
            refused[key] = key .. ': no such entry; the keys are "certs/<id>", "hosts/<host>" and "default"'
        end
    end
    for _, key in ipairs(delete) do
        refused[key] = nil
        local kind, name = match(key, "^(%a+)/(.+)$")
        if kind == "certs" and index.digests[name] then
            index.digests[name], gone[name], was_held[name] = nil, true, true
        elseif kind == "hosts" then
            index.hosts[lower(name)] = nil
        elseif key == "default" then
            index.default = nil
        end
    end
    local ok, err = keep_certificates(dict, index, certs, refused)
    if not ok then
        return nil, err
    end
    local moved = {}  -- the certificates held now and not before, or before and not now
    for id, held in pairs(was_held) do
        if (index.digests[id] ~= nil) ~= held then
            moved[id] = true
        end
    end
    if next(moved) then
        for host, id in pairs(index.hosts) do
            if moved[id] then
                refused["hosts/" .. host] = not_held(index, id, "hosts/" .. host)
            end
        end
        if index.default and moved[index.default] then
            refused.default = not_held(index, index.default, "default")
        end
    end
    name_hosts(index, hosts, refused)
    return publish(dict, index, gone)
end

store.define("certificates", { build = build, put = put, load = load, change = change })

-- A parsed entry (X509 chain and key, the cache's node) takes about 8 KiB of a worker's memory with an EC P-256
-- key, more with RSA; parsing one again costs about 0.5 ms (OpenSSL 3's PEM key decoders), a handshake's worth.
-- Sized for the scale measured (bench_tls_scale.py: 10,000 certificates, SNI drawn at random, every one served
-- from the cache once warm): at most about 80 MiB per worker with P-256 keys.
local PARSED_MAX = 10000
local parsed = assert(lrucache.new(PARSED_MAX))  -- this worker's parsed certificates: id -> {digest, cert, key, der}

local function parse(dict, id, digest)
    local cert_pem, key_pem = dict:get("cert:" .. id), dict:get("key:" .. id)
    if not cert_pem or not key_pem then
        return nil
    end
    local cert, err = ssl.parse_pem_cert(cert_pem)
    if not cert then
        ngx.log(ngx.ERR, "certificate ", id, " does not parse: ", err)
        return nil
    end
    local key
    key, err = ssl.parse_pem_priv_key(key_pem)
    if not key then
        ngx.log(ngx.ERR, "private key of certificate ", id, " does not parse: ", err)
        return nil
    end
    -- The chain in DER for OCSP stapling (its request names the certificate and its issuer).
    local der = settings.enable_ocsp and ssl.cert_pem_to_der(cert_pem) or nil
    return { digest = digest, cert = cert, key = key, der = der }
end

local function certificate_for(index, dict, name)
    local digests = index.digests
    local id
    if name then
        name = lower(name)
        id = index.hosts[name]
        if not digests[id] then  -- an entry naming a certificate nginx does not hold is as none
            local dot = find(name, ".", 1, true)
            id = dot and index.hosts["*" .. sub(name, dot)]
        end
    end
    if not digests[id] then
        id = index.default
    end
    local digest = id and digests[id]
    if not digest then
        return nil
    end
    local entry = parsed:get(id)
    if entry and entry.digest == digest then
        return entry
    end
    entry = parse(dict, id, digest)
    if entry then
        parsed:set(id, entry)
    else
        parsed:delete(id)
    end
    return entry
end

function _M.serve()
    local index = store.get("certificates")
    local name = ssl.server_name()
    if settings.ssl_reject_handshake and not router.names_host(name) then
        -- ConfigMap ssl-reject-handshake: no certificate (not even the default one) for a name no Ingress serves.
        return ngx.exit(ngx.ERROR)
    end
    -- A host with client authentication (auth-tls-*): ask for a certificate; the router checks it per route.
    local routes = router.host_entry(name)
    if routes and routes.client_certificate then
        client_auth.request(routes.client_certificate)
    end
    local entry = certificate_for(index, ngx.shared.pyngress_certificates, name)
    if not entry then
        return  -- nginx's static ssl_certificate
    end
    local ok, err = ssl.clear_certs()
    if ok then
        ok, err = ssl.set_cert(entry.cert)
    end
    if ok then
        ok, err = ssl.set_priv_key(entry.key)
    end
    if not ok then
        ngx.log(ngx.ERR, "cannot serve certificate for ", tostring(ssl.server_name()), ": ", err)
        return ngx.exit(ngx.ERROR)
    end
    if entry.der then
        ocsp_stapling.staple(entry.digest, entry.der)
    end
end

return _M
