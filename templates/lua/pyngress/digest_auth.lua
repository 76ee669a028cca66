--[[
auth-type digest: HTTP digest authentication (RFC 7616 with MD5 and qop=auth, as the nginx module
ingress-nginx uses checks it), in the access phase of the profile's location.

The users are an htdigest file (user:realm:HA1, HA1 = MD5(user:realm:password)) that the syncer writes;
each worker re-reads it at most once a second, so a changed Secret applies without a reload.

A nonce is "<issued at>.<worker>.<count>-<HMAC of that>", signed with a key made when nginx (re)loads its configuration: it
needs no server-side state to check. It lives NONCE_SECONDS; an answer that is right but whose nonce expired
or was signed before a reload gets a new challenge with stale=true, which clients answer without asking the
user again. Each (nonce, nc) pair is accepted once across all workers (a shared dict), so a replayed
Authorization header is refused.
]]
local md5, hmac_sha1 = ngx.md5, ngx.hmac_sha1
local find, sub, match, gsub, format, byte = string.find, string.sub, string.match, string.gsub, string.format,
    string.byte

local NONCE_SECONDS = 60
local FILE_CHECK_SECONDS = 1

local _M = {}

local function random_key()
    local urandom = assert(io.open("/dev/urandom", "rb"))
    local key = urandom:read(32)
    urandom:close()
    return key
end

local key = random_key()  -- in the master: the workers share it (boot.lua loads this module there)
local used = ngx.shared.pyngress_digest_nonces

local function signature(issued)
    return (gsub(hmac_sha1(key, issued), ".", function(c) return format("%02x", byte(c)) end))
end

local issued_here = 0  -- nonces this worker made: with its pid, what makes each nonce unique

local function new_nonce()
    issued_here = issued_here + 1
    local stamp = format("%d.%x.%x", ngx.time(), ngx.worker.pid(), issued_here)
    return stamp .. "-" .. signature(stamp)
end

-- Whether `nonce` is one of ours and still young.
local function fresh(nonce)
    local stamp, signed = match(nonce, "^([%d.%x]+)%-(%x+)$")
    local issued = stamp and tonumber(match(stamp, "^%d+"))
    return issued ~= nil and signed == signature(stamp) and ngx.time() - issued <= NONCE_SECONDS
end

local files = {}  -- path -> {checked = time, users = {user -> {realm = HA1}}}

local function users_of(path)
    local now = ngx.now()
    local cached = files[path]
    if cached and now - cached.checked < FILE_CHECK_SECONDS then
        return cached.users
    end
    local users = {}
    local file = io.open(path, "rb")
    if file then
        for line in file:lines() do
            -- The realm may hold ':'; the user may not, and HA1 is hex.
            local user, realm, ha1 = match(line, "^([^:]+):(.*):(%x+)$")
            if user then
                users[user] = users[user] or {}
                users[user][realm] = ha1
            end
        end
        file:close()
    else
        ngx.log(ngx.ERR, "digest auth: cannot read ", path, "; every request is refused")
    end
    files[path] = { checked = now, users = users }
    return users
end

-- The parameters of an Authorization: Digest header: name=value or name="value", comma separated.
local function parameters(header)
    local params, at, length = {}, 1, #header
    while at <= length do
        local _, name_end, name = find(header, "^[%s,]*([%w%-]+)%s*=%s*", at)
        if not name then
            return nil
        end
        local value
        if sub(header, name_end + 1, name_end + 1) == '"' then
            local close = find(header, '"', name_end + 2, true)
            if not close then
                return nil
            end
            value, at = sub(header, name_end + 2, close - 1), close + 1
        else
            local stop = find(header, ",", name_end + 1, true) or length + 1
            value, at = match(sub(header, name_end + 1, stop - 1), "^(.-)%s*$"), stop
        end
        params[name:lower()] = value
        at = (find(header, "[^%s]", at) or length + 1)
        if at <= length and sub(header, at, at) ~= "," then
            return nil
        end
    end
    return params
end

local function challenge(realm, stale)
    ngx.header["WWW-Authenticate"] = 'Digest algorithm="MD5", qop="auth", realm="' .. realm .. '", nonce="'
        .. new_nonce() .. '"' .. (stale and ', stale="true"' or "")
    return ngx.exit(ngx.HTTP_UNAUTHORIZED)
end

-- Lets the request through when it carries a right answer to a fresh nonce; else a 401 with a challenge.
function _M.check(realm, path)
    local header = ngx.var.http_authorization
    if not header or sub(header, 1, 7):lower() ~= "digest " then
        return challenge(realm, false)
    end
    local p = parameters(sub(header, 8))
    if not p or not p.username or not p.nonce or not p.uri or not p.response or p.realm ~= realm
            or p.qop ~= "auth" or not p.cnonce or not match(p.nc or "", "^%x%x%x%x%x%x%x%x$")
            or (p.algorithm and p.algorithm:upper() ~= "MD5") or p.uri ~= ngx.var.request_uri then
        return challenge(realm, false)
    end
    local ha1 = (users_of(path)[p.username] or {})[realm]
    if not ha1 then
        return challenge(realm, false)
    end
    local ha2 = md5(ngx.req.get_method() .. ":" .. p.uri)
    local expected = md5(ha1 .. ":" .. p.nonce .. ":" .. p.nc .. ":" .. p.cnonce .. ":auth:" .. ha2)
    if p.response:lower() ~= expected then
        return challenge(realm, false)
    end
    if not fresh(p.nonce) then
        return challenge(realm, true)  -- the right password: the client retries with a new nonce by itself
    end
    local ok, err = used:add(p.nonce .. "/" .. p.nc, true, NONCE_SECONDS + 5)
    if not ok then
        if err ~= "exists" then
            ngx.log(ngx.ERR, "digest auth: cannot record a nonce count: ", err)
        end
        return challenge(realm, false)  -- replayed (or not recorded): never accepted twice
    end
end

return _M
