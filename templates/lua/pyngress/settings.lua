-- Values rendered into nginx.conf for this configuration (set by boot.master, read by the other modules).
local _M = {
    http_port = 80,
    https_port = 443,
    -- ConfigMap use-forwarded-headers or use-proxy-protocol: the redirect to HTTPS follows the scheme the load
    -- balancer says the client used ($pyngress_forwarded_proto), not the one nginx saw.
    forwarded_scheme = false,
    -- The named locations this nginx.conf defines: profile name -> true.
    profiles = {},
    -- CORS options of the profiles that have them: profile name -> options (see cors.lua).
    cors = {},
    -- The largest request body of each profile with a limit: profile name -> bytes.
    body_limits = {},
    -- Whether requests are counted (pyngress's nginx module; monitor.lua hands the counts on): --enable-metrics.
    metrics = false,
    -- OpenTelemetry tracing (tracing.lua, services/nginxconf/tracing.py), nil when the ConfigMap configures none.
    tracing = nil,
    -- ConfigMap custom-http-errors: status -> true, answered through the default backend's error locations.
    custom_http_errors = {},
    -- custom-http-errors of the profiles with a list of their own (which replaces the ConfigMap's there):
    -- profile name -> {status -> true}.
    error_codes = {},
    -- Profiles with another named location for HTTP/2 requests (auth-keepalive): profile name -> location.
    http2_locations = {},
    -- ConfigMap generate-request-id: the router gives a request without an X-Request-ID one (request_id.lua).
    generate_request_id = true,
    -- ConfigMap ssl-reject-handshake: a TLS handshake for a name no Ingress serves is refused (certificates.lua).
    ssl_reject_handshake = false,
    -- ConfigMap enable-ocsp: certificates served by SNI get their OCSP response stapled (ocsp_stapling.lua).
    enable_ocsp = false,
}

function _M.set(values)
    _M.http_port = values.http_port
    _M.https_port = values.https_port
    _M.forwarded_scheme = values.forwarded_scheme == true
    local profiles = {}
    for _, name in ipairs(values.profiles) do
        profiles[name] = true
    end
    _M.profiles = profiles
    _M.cors = values.cors or {}
    _M.body_limits = values.body_limits or {}
    _M.metrics = values.metrics == true
    _M.tracing = values.tracing
    _M.custom_http_errors = values.custom_http_errors or {}
    _M.error_codes = values.error_codes or {}
    _M.http2_locations = values.http2_locations or {}
    _M.generate_request_id = values.generate_request_id
    _M.ssl_reject_handshake = values.ssl_reject_handshake == true
    _M.enable_ocsp = values.enable_ocsp == true
end

return _M
