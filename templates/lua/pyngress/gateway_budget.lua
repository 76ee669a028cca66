--[==[
An HTTPRoute rule's retry and timeouts, spent per request by the balancer (services/syncer/model/gateway/budgets.py
plans them; table_schema.GATEWAY_BUDGET declares the action's "budget" field):

    "budget": {"attempts": <retries after the first try>, "request_ms": <deadline>, "backend_ms": <per attempt>}

The router hands a budgeted request to the balancer in $pg_bal as "!<attempts> <deadline> <per attempt>
<backend>" (the deadline in epoch milliseconds, 0 for none; a variable survives the jump to the profile's location,
ngx.ctx does not), so that requests without a budget cost the balancer nothing more than a byte compared.

Each attempt's connect, send and read timeouts are the smaller of the per-attempt timeout and what is left before the
deadline, so an attempt still running at the deadline is cut there and answers 504. One more try is granted at each
attempt while retries are left: which failures are retried is the profile's proxy_next_upstream, and with a deadline
its proxy_next_upstream_timeout starts no attempt after it. nginx itself adds a try after an error on a reused
keepalive connection; a rule with `retry` refuses it once its own retries are spent, as the spec caps them (nginx's
500, which the rule's location profile answers 503, as it answers nginx's 502 after the last connection error).
]==]
local balancer = require("ngx.balancer")

local match, floor = string.match, math.floor
local now = ngx.now

local _M = {}

local function count_of(raw, where)
    if raw == nil or raw == ngx.null then
        return 0
    end
    local n = tonumber(raw)
    if not n or n < 0 or n ~= floor(n) then
        error(where .. ": must be a whole number, 0 or more", 0)
    end
    return n
end

-- An action's "budget" as the router keeps it, or nil; raises an error naming what is wrong.
function _M.budget_of(raw, where)
    if raw == nil or raw == ngx.null then
        return nil
    end
    if type(raw) ~= "table" then
        error(where .. ": must be an object", 0)
    end
    return { attempts = count_of(raw.attempts, where .. " attempts"),
             request_ms = count_of(raw.request_ms, where .. " request_ms"),
             backend_ms = count_of(raw.backend_ms, where .. " backend_ms") }
end

-- What the router puts in $pg_bal for `backend`: the backend alone without a budget.
function _M.choice(budget, backend)
    if not budget then
        return backend
    end
    local deadline = budget.request_ms > 0 and floor(now() * 1000) + budget.request_ms or 0
    return "!" .. budget.attempts .. " " .. deadline .. " " .. budget.backend_ms .. " " .. backend
end

-- The backend of a budgeted choice and the budget's state for spend() (kept in ngx.ctx by the balancer).
function _M.parse(chosen)
    local attempts, deadline, per_attempt, backend = match(chosen, "^!(%d+) (%d+) (%d+) (.+)$")
    attempts = tonumber(attempts)
    return backend, { left = attempts, capped = attempts > 0, tries = 0, granted = 1, deadline = tonumber(deadline),
                      per_attempt = tonumber(per_attempt) }
end

-- In the balancer, for each attempt of a budgeted request: its timeouts, and one more try while retries are left;
-- false for a try beyond the rule's retries (one nginx added), which must not be made.
function _M.spend(state)
    state.tries = state.tries + 1
    if state.tries > state.granted and state.capped then
        ngx.log(ngx.INFO, "the route's retries are spent: no try after an error on a reused connection")
        return false
    end
    local timeout = state.per_attempt
    if state.deadline > 0 then
        local left = state.deadline - now() * 1000
        if timeout == 0 or left < timeout then
            timeout = left
        end
    end
    if timeout > 0 or state.deadline > 0 then
        local seconds = timeout < 1 and 0.001 or timeout / 1000  -- past the deadline: an attempt cut at once
        local ok, err = balancer.set_timeouts(seconds, seconds, seconds)
        if not ok then
            ngx.log(ngx.ERR, "cannot set the route's timeouts: ", err)
        end
    end
    if state.left > 0 then
        state.left, state.granted = state.left - 1, state.granted + 1
        local ok, err = balancer.set_more_tries(1)
        if not ok then
            ngx.log(ngx.ERR, "cannot grant the route's retry: ", err)
        end
    end
    return true
end

return _M
