--[[
OCSP stapling (ConfigMap enable-ocsp) for the certificates certificates.lua serves by SNI, as ingress-nginx
staples them: nginx's own ssl_stapling cannot, since the certificate is chosen in Lua.

A handshake whose client asks for the status gets the response cached for its certificate (by the certificate's
digest, in the pyngress_ocsp shared dictionary, so every worker shares it). Without one the handshake goes on
unstapled, and a timer asks the OCSP responder the certificate names (its Authority Information Access) over
HTTP; a response that does not verify against the certificate's chain (tls.crt must hold the issuer after the
certificate) is logged and not cached. A response is kept for CACHE_SECONDS, then fetched again.
]]
local ocsp = require("ngx.ocsp")

local _M = {}

local CACHE_SECONDS = 3600
local RETRY_SECONDS = 60       -- after a failed fetch, the next handshake does not ask again before this
local TIMEOUT_MS = 5000

local function cache()
    return ngx.shared.pyngress_ocsp
end

-- POST `body` to the responder `url` (http://host[:port]/path); the response body, or nil and why.
local function post(url, body)
    local host, port, path = string.match(url, "^http://([^/:]+):?(%d*)(/?.*)$")
    if not host then
        return nil, "the responder " .. url .. " is not an http:// URL"
    end
    local sock = ngx.socket.tcp()
    sock:settimeout(TIMEOUT_MS)
    local ok, err = sock:connect(host, tonumber(port) or 80)
    if not ok then
        return nil, "cannot connect to " .. url .. ": " .. tostring(err)
    end
    ok, err = sock:send(table.concat({
        "POST ", path ~= "" and path or "/", " HTTP/1.0\r\nHost: ", host, "\r\n",
        "Content-Type: application/ocsp-request\r\nContent-Length: ", #body, "\r\n\r\n", body }))
    local head, body
    if ok then
        head, err = sock:receiveuntil("\r\n\r\n")()
    end
    local status = head and tonumber(string.match(head, "^HTTP/%d%.%d (%d%d%d)"))
    if status == 200 then
        -- A responder may keep the connection open after its answer: read what Content-Length says.
        local length = tonumber(string.match(string.lower(head), "\r\ncontent%-length:%s*(%d+)"))
        body, err = sock:receive(length or "*a")
    end
    sock:close()
    if not head then
        return nil, "no answer from " .. url .. ": " .. tostring(err)
    elseif status ~= 200 then
        return nil, url .. " answered " .. tostring(status)
    end
    return body, err
end

local function fetch(premature, key, der)
    if premature then
        return
    end
    local url, err = ocsp.get_ocsp_responder_from_der_chain(der)
    local request, response
    if url then
        request, err = ocsp.create_ocsp_request(der)
    end
    if request then
        response, err = post(url, request)
    end
    local valid
    if response then
        valid, err = ocsp.validate_ocsp_response(response, der)
    end
    if valid then
        cache():set("resp:" .. key, response, CACHE_SECONDS)
    else
        ngx.log(ngx.WARN, "OCSP stapling: no response for the certificate to staple: ", tostring(err))
    end
end

-- In ssl_certificate_by_lua, after the certificate `der` (its chain, DER) of digest `key` is set.
function _M.staple(key, der)
    local response = cache():get("resp:" .. key)
    if response then
        local ok, err = ocsp.set_ocsp_status_resp(response)
        if not ok then
            ngx.log(ngx.WARN, "OCSP stapling: ", err)
        end
        return
    end
    -- One fetch at a time per certificate across the workers; a failure waits RETRY_SECONDS.
    if cache():add("fetching:" .. key, true, RETRY_SECONDS) then
        local ok, err = ngx.timer.at(0, fetch, key, der)
        if not ok then
            ngx.log(ngx.WARN, "OCSP stapling: cannot start the fetch: ", err)
        end
    end
end

return _M
