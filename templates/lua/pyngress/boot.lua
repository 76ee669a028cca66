-- Entry points for nginx's init phases (see nginx.conf.j2).
local settings = require("pyngress.settings")
local store = require("pyngress.store")
-- Loaded here, in the master, because the workers run as nobody and may not be able to read them.
local router = require("pyngress.router")
require("pyngress.balancer")
require("pyngress.certificates")
require("pyngress.cors")
require("pyngress.external_auth")
-- Its nonce key is made at load: loaded in the master, every worker signs and checks nonces with the same one.
require("pyngress.digest_auth")
require("pyngress.api")
local monitor = require("pyngress.monitor")
local tracing = require("pyngress.tracing")

local _M = {}

-- init_by_lua: runs in the master at start and at every HUP, before the workers fork (not for `nginx -t`).
function _M.master(values)
    settings.set(values)
    store.load_state_files(values.state_dir .. "/dynamic")
end

-- init_worker_by_lua: each worker starts its round robin at its own place, and its metrics and spans timers; the
-- router takes its variables' indexes in the running configuration.
function _M.worker()
    math.randomseed(ngx.now() * 1000 + ngx.worker.pid())
    monitor.start()
    tracing.start_worker()
    router.init_worker()
end

return _M
