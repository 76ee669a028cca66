--[[
Client certificates (auth-tls-*) per route, checked by the router in the rewrite phase.

All hosts share one nginx TLS server, whose ssl_verify_client cannot differ by host. So the handshake only
asks for a certificate (certificates.lua calls request() for an SNI whose host has client authentication),
and each request on a route of an Ingress with auth-tls-* has the client's certificate verified here, with
OpenSSL, against that Ingress's own CA (and CRL): whatever the handshake's SNI, a resumed session or a
certificate another host accepted, only this CA counts for these routes. The result fills the headers the
backend gets (ssl-client-verify, ssl-client-subject-dn, ssl-client-issuer-dn, ssl-client-cert), as nginx's
$ssl_client_verify would read: "SUCCESS", "FAILED:<reason>" or "NONE".

A config is a routes-table entry: {"ca": PEM, "crl": PEM | null, "verify": "on" | "off" | "optional" |
"optional_no_ca", "depth": n, "error_page": URL | null, "pass_certificate": bool, "match_cn": "CN=..." | null,
"close": bool (optional: a refused certificate closes the connection unanswered, as a Gateway's frontend validation
refuses)}.

A host's Gateway rules have one config of their own, the "client_auth" of its "gateway" entry (the validation of the
HTTPS listener serving the host): configs() takes it beside the Ingresses' under the key GATEWAY, which no Ingress
("namespace/name") can have.
]]
local ffi = require("ffi")
local ssl = require("ngx.ssl")
local cjson = require("cjson.safe")
local pcre = require("pyngress.pcre")

local C = ffi.C

ffi.cdef [[
typedef struct bio_st pyngress_BIO;
typedef struct x509_st pyngress_X509;
typedef struct X509_crl_st pyngress_X509_CRL;
typedef struct x509_store_st pyngress_X509_STORE;
typedef struct x509_store_ctx_st pyngress_X509_STORE_CTX;
pyngress_BIO *BIO_new_mem_buf(const void *buf, int len);
int BIO_free(pyngress_BIO *a);
pyngress_X509 *PEM_read_bio_X509(pyngress_BIO *bp, pyngress_X509 **x, void *cb, void *u);
pyngress_X509_CRL *PEM_read_bio_X509_CRL(pyngress_BIO *bp, pyngress_X509_CRL **x, void *cb, void *u);
void X509_free(pyngress_X509 *a);
void X509_CRL_free(pyngress_X509_CRL *a);
pyngress_X509_STORE *X509_STORE_new(void);
void X509_STORE_free(pyngress_X509_STORE *v);
int X509_STORE_add_cert(pyngress_X509_STORE *ctx, pyngress_X509 *x);
int X509_STORE_add_crl(pyngress_X509_STORE *ctx, pyngress_X509_CRL *x);
int X509_STORE_set_flags(pyngress_X509_STORE *ctx, unsigned long flags);
int X509_STORE_set_depth(pyngress_X509_STORE *store, int depth);
pyngress_X509_STORE_CTX *X509_STORE_CTX_new(void);
void X509_STORE_CTX_free(pyngress_X509_STORE_CTX *ctx);
int X509_STORE_CTX_init(pyngress_X509_STORE_CTX *ctx, pyngress_X509_STORE *store, pyngress_X509 *x509, void *chain);
int X509_STORE_CTX_set_purpose(pyngress_X509_STORE_CTX *ctx, int purpose);
int X509_verify_cert(pyngress_X509_STORE_CTX *ctx);
int X509_STORE_CTX_get_error(pyngress_X509_STORE_CTX *ctx);
const char *X509_verify_cert_error_string(long n);
void ERR_clear_error(void);
]]

local X509_V_FLAG_CRL_CHECK, X509_V_FLAG_CRL_CHECK_ALL = 0x4, 0x8  -- as nginx's ssl_crl sets them
local X509_PURPOSE_SSL_CLIENT = 1  -- a certificate a TLS client may authenticate with, as nginx checks it

local _M = { GATEWAY = "gateway" }

-- Each PEM block of `pem` read with `read` (PEM_read_bio_X509 or _CRL) and handed to `add`; false when
-- the text holds none that OpenSSL reads.
local function each_pem(pem, read, free, add)
    local bio = C.BIO_new_mem_buf(pem, #pem)
    if bio == nil then
        return false
    end
    local count = 0
    while true do
        local item = read(bio, nil, nil, nil)
        if item == nil then
            break
        end
        add(item)
        free(item)
        count = count + 1
    end
    C.BIO_free(bio)
    C.ERR_clear_error()  -- reading past the last block leaves an error that later OpenSSL calls would report
    return count > 0
end

local stores = setmetatable({}, { __mode = "k" })  -- config table -> X509_STORE (or false), per worker

local function store_of(config)
    local store = stores[config]
    if store ~= nil then
        return store or nil
    end
    store = ffi.gc(C.X509_STORE_new(), C.X509_STORE_free)
    local ok = store ~= nil and each_pem(config.ca, C.PEM_read_bio_X509, C.X509_free, function(cert)
        C.X509_STORE_add_cert(store, cert)
    end)
    if ok and config.crl then
        ok = each_pem(config.crl, C.PEM_read_bio_X509_CRL, C.X509_CRL_free, function(crl)
            C.X509_STORE_add_crl(store, crl)
        end)
        C.X509_STORE_set_flags(store, X509_V_FLAG_CRL_CHECK + X509_V_FLAG_CRL_CHECK_ALL)
    end
    if ok then
        C.X509_STORE_set_depth(store, config.depth)
    else
        ngx.log(ngx.ERR, "a client certificate CA or CRL does not load: every certificate fails against it")
        store = nil
    end
    stores[config] = store or false
    return store
end

-- "SUCCESS", "FAILED:<reason>" or "NONE" for the client certificate `pem` against `config`'s CA.
local function verification(config, pem)
    if not pem or pem == "" then
        return "NONE"
    end
    local store = store_of(config)
    if not store then
        return "FAILED:the CA of this Ingress does not load"
    end
    local result = "FAILED:unreadable certificate"
    each_pem(pem, C.PEM_read_bio_X509, C.X509_free, function(cert)
        local ctx = C.X509_STORE_CTX_new()
        if ctx ~= nil and C.X509_STORE_CTX_init(ctx, store, cert, nil) == 1 then
            C.X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT)
            if C.X509_verify_cert(ctx) == 1 then
                result = "SUCCESS"
            else
                result = "FAILED:" .. ffi.string(C.X509_verify_cert_error_string(C.X509_STORE_CTX_get_error(ctx)))
            end
        end
        if ctx ~= nil then
            C.X509_STORE_CTX_free(ctx)
        end
    end)
    C.ERR_clear_error()
    return result
end

local REFUSED = { on = { NONE = true, FAILED = true }, optional = { FAILED = true } }

-- Checks the request against `config`; sets the ssl-client-* header variables. Returns nil when the
-- request may go on, else ends it and returns true: 400 (or a redirect to the error page) for a refused
-- certificate, 403 when its subject does not match auth-tls-match-cn.
function _M.check(config)
    local var = ngx.var
    local https = var.https == "on"
    local outcome = "NONE"
    if config.verify ~= "off" and https then
        outcome = verification(config, var.ssl_client_raw_cert)
    end
    local refused = REFUSED[config.verify]
    local kind = (outcome == "SUCCESS" or outcome == "NONE") and outcome or "FAILED"
    if refused and refused[kind] then
        if config.close then
            ngx.exit(ngx.HTTP_CLOSE)  -- 444: the connection is closed, nothing answered
        elseif config.error_page then
            ngx.redirect(config.error_page, 302)
        else
            ngx.exit(400)
        end
        return true
    end
    local subject = https and var.ssl_client_s_dn or ""
    if config.match_cn and not ngx.re.find(subject, config.match_cn, "jo") then
        ngx.exit(403)
        return true
    end
    var.pyngress_client_verify = outcome
    if outcome ~= "NONE" then
        var.pyngress_client_subject_dn = subject
        var.pyngress_client_issuer_dn = var.ssl_client_i_dn
        if config.pass_certificate then
            var.pyngress_client_cert = var.ssl_client_escaped_cert
        end
    end
end

local VERIFY = { on = true, off = true, optional = true, optional_no_ca = true }

-- A host's "client_auth" routes-table entry, and the "client_auth" of its Gateway rules (`gateway`, may be nil),
-- checked: Ingress (or GATEWAY) -> its config, and what the handshake asks for (request()): the CAs of every config
-- that verifies (concatenated, the client's hint), the longest depth.
function _M.configs(raw, host, gateway)
    local auths, ask = {}, nil
    if raw ~= nil and raw ~= cjson.null and type(raw) ~= "table" then
        error(host .. ": client_auth must be an object", 0)
    end
    local function add(owner, config)
        if type(config) ~= "table" or type(config.ca) ~= "string" or not VERIFY[config.verify]
            or type(config.depth) ~= "number" then
            error(host .. ": client_auth of " .. tostring(owner) .. " must have ca, verify and depth", 0)
        end
        for _, key in ipairs({ "crl", "error_page", "match_cn" }) do
            if config[key] == cjson.null then
                config[key] = nil
            end
        end
        pcre.checked(config.match_cn, "jo", host .. ": client_auth match_cn of " .. tostring(owner))
        config.pass_certificate = config.pass_certificate == true
        config.close = config.close == true
        auths[owner] = config
        if config.verify ~= "off" then
            ask = ask or { ca = "", depth = 0 }
            ask.ca = ask.ca .. config.ca .. "\n"
            ask.depth = config.depth > ask.depth and config.depth or ask.depth
        end
    end
    if type(raw) == "table" then
        for ingress, config in pairs(raw) do
            add(ingress, config)
        end
    end
    if gateway ~= nil and gateway ~= cjson.null then
        add(_M.GATEWAY, gateway)
    end
    return auths, ask
end

-- For certificates.lua (ssl_certificate_by_lua): ask the client for a certificate, naming the CAs of the
-- host's Ingresses. The handshake goes on whatever the client sends: check() decides per request.
function _M.request(ask)
    if not ask.chain then
        ask.chain = ssl.parse_pem_cert(ask.ca) or false
    end
    local ok, err = ssl.verify_client(ask.chain or nil, ask.depth)
    if not ok then
        ngx.log(ngx.ERR, "cannot ask for a client certificate: ", err)
    end
end

return _M
