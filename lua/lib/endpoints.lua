-- Endpoints (docs/DESIGN.md §3.9): the places one model can be called — API
-- keys of several orgs, Azure deployments, OpenAI-compatible servers — each
-- with its own buckets, and the shared health of each. Used by dispatch
-- (which endpoint takes a job: ep_route), by job_settle (what a call taught
-- about its endpoint: ep_health_settle, ep_other_can_serve) and by
-- endpoint_admin / status. Key layout in common/redis/keys.h:
--   P eps            ZSET  endpoint names (score: when added, ms)
--   P ep:<name>      HASH  base_url, api_version ('' OpenAI style; set: Azure),
--                          kind (openai|azure|compatible), tier, weight,
--                          fail_threshold, fail_window_ms, cooldown_ms,
--                          cooldown_max_ms, probe_ms, batch_max_requests and
--                          batch_max_bytes (offload's input file limits there,
--                          lib/pbatch_ep.lua), "dep:<model>" (an Azure
--                          deployment name per model; default the model)
--   P eph:<name>     HASH  health: state ok|cooling|disabled, why, since_ms,
--                          fails + fail_t0 (failures in the current window),
--                          cool_until, cool_ms (the back-off of the next
--                          cooling), probe_until (a half-open probe in flight),
--                          lat_ms (EWMA of call latency), n_ok, n_fail, n_429
--   P epm:<model>    SET   the endpoints serving model (llmq limits set MODEL
--                          --endpoint NAME)
--   P eproute        HASH  model -> spillover|balanced|fastest
--   P epfb           HASH  model -> its fallback model
-- An endpoint's buckets are "<model>@<endpoint>" (level model: it mirrors
-- that key's limit for that model); tenant and user buckets stay the
-- model's, so their rules apply on top whichever endpoint serves the job.
-- A model no endpoint serves runs on the implicit endpoint: bucket
-- "<model>", the worker's own base URL and key (today's setup).
-- uses jobs: llmq_job_fields, llmq_job_set
-- uses keys: KEY
-- uses limiter: limiter_bucket, limiter_fits, limiter_path, limiter_try, limiter_use
-- uses limiter_window: window_evict, window_stale
-- uses sched: sched_wake_buckets
-- uses util: llmq_int_text, llmq_split

local EP_DEFAULTS = { fail_threshold = 5, fail_window_ms = 10000, cooldown_ms = 1000,
    cooldown_max_ms = 60000, probe_ms = 30000 }
-- Every endpoint of a model disabled: its node is blocked this long. Only a
-- safety net: `llmq endpoints enable` (and a health change that ends an
-- endpoint's cooling) unblocks it at once (ep_wake_models).
local EP_ALL_DISABLED_RECHECK_MS = 60000

-- The bucket of model on endpoint name ('' : the implicit endpoint's).
local function ep_bucket(model, name)
    if name == nil or name == '' then
        return model
    end
    return model .. '@' .. name
end

-- Endpoint name's configuration and health, read once per call into cache
-- (cache.eps[name]); model: for its Azure deployment (cache per model).
local function ep_load(P, cache, name, model)
    local e = cache.eps[name]
    if e == nil then
        local v = redis.call('HMGET', KEY.endpoint(P, name), 'base_url', 'api_version', 'tier',
            'weight', 'fail_threshold', 'fail_window_ms', 'cooldown_ms', 'cooldown_max_ms',
            'probe_ms')
        local h = redis.call('HMGET', KEY.ep_health(P, name), 'state', 'cool_until', 'probe_until',
            'lat_ms', 'why')
        e = { name = name, exists = v[1] ~= false, base_url = v[1] or '', api_version = v[2] or '',
            tier = tonumber(v[3]) or 1, weight = tonumber(v[4]) or 1,
            fail_threshold = tonumber(v[5]) or EP_DEFAULTS.fail_threshold,
            fail_window_ms = tonumber(v[6]) or EP_DEFAULTS.fail_window_ms,
            cooldown_ms = tonumber(v[7]) or EP_DEFAULTS.cooldown_ms,
            cooldown_max_ms = tonumber(v[8]) or EP_DEFAULTS.cooldown_max_ms,
            probe_ms = tonumber(v[9]) or EP_DEFAULTS.probe_ms,
            state = h[1] or 'ok', cool_until = tonumber(h[2]) or 0,
            probe_until = tonumber(h[3]) or 0, lat = tonumber(h[4]) or 0, why = h[5] or '',
            deps = {} }
        cache.eps[name] = e
    end
    if model ~= nil and e.deps[model] == nil then
        e.deps[model] = redis.call('HGET', KEY.endpoint(P, name), 'dep:' .. model) or model
    end
    return e
end

-- Whether endpoint e may be sent a job at now: 'ok'; 'probe' (cooling over:
-- one half-open request may go); or false and the ms until it may be
-- looked at again (cooling, a probe in flight; disabled: nil).
local function ep_usable(e, now)
    if not e.exists or e.state == 'disabled' then
        return false, nil
    end
    if e.state ~= 'cooling' then
        return 'ok'
    end
    if now < e.cool_until then
        return false, e.cool_until - now
    end
    if now < e.probe_until then
        return false, e.probe_until - now
    end
    return 'probe'
end

-- The routing of model in this call (cached in cache.models): nil for a
-- model that no endpoint serves (the implicit endpoint), else
-- { strategy, fallback, list = endpoints of the model in name order }.
local function ep_model(P, cache, model)
    local m = cache.models[model]
    if m ~= nil then
        return m or nil
    end
    local names = redis.call('SMEMBERS', KEY.model_eps(P, model))
    if #names == 0 then
        cache.models[model] = false
        return nil
    end
    table.sort(names)
    local list = {}
    for i = 1, #names do
        list[i] = ep_load(P, cache, names[i], model)
    end
    local v = redis.call('HMGET', KEY.ep_routes(P), model)
    local fb = redis.call('HGET', KEY.ep_fallbacks(P), model)
    m = { model = model, strategy = v[1] or 'spillover', fallback = fb or nil, list = list }
    cache.models[model] = m
    return m
end

-- A new routing cache for one dispatch call; serves: the worker's endpoint
-- names (ARGV text, comma-separated; an empty name is the implicit
-- endpoint; nil: the implicit one only).
local function ep_cache_new(serves_text)
    local serves = {}
    for _, n in ipairs(llmq_split(serves_text or '', ',')) do
        serves[n] = true
    end
    return { eps = {}, models = {}, serves = serves, denied = {}, own_wait = nil }
end

-- A set from comma-separated text ('' or nil: nil, no restriction).
local function ep_name_set(text)
    if text == nil or text == false or text == '' then
        return nil
    end
    local set = {}
    for _, n in ipairs(llmq_split(text, ',')) do
        if n ~= '' then
            set[n] = true
        end
    end
    return set
end

-- True when routing m (nil: the implicit endpoint) has an endpoint named in
-- pin_text (comma-separated): a pinned job can run somewhere.
local function ep_pins_any(m, pin_text)
    if m == nil then
        return false
    end
    local pin = ep_name_set(pin_text) or {}
    for _, e in ipairs(m.list) do
        if pin[e.name] then
            return true
        end
    end
    return false
end

-- Endpoints of routing m that job (pin: a name set or nil; failed: names of
-- endpoints that already failed it) may use now, in the order to try them,
-- each with its usability; and the least wait of those out for now (nil: all
-- disabled or none). Endpoints that failed the job go last.
local function ep_candidates(s, m, pin, failed)
    local now = s.now
    local ready, least = {}, nil
    for _, e in ipairs(m.list) do
        if pin == nil or pin[e.name] then
            local use, wait = ep_usable(e, now)
            if use then
                local b = limiter_bucket(s, ep_bucket(m.model, e.name))
                local c = b.cfg
                local rank
                if m.strategy == 'balanced' then
                    if c ~= nil and window_stale(b, now) then
                        window_evict(b, now)
                    end
                    rank = -(1 - math.min(limiter_use(b, now), 1)) * e.weight
                elseif m.strategy == 'fastest' then
                    rank = e.lat
                else
                    rank = e.tier
                end
                if failed ~= nil and failed[e.name] then
                    rank = rank + 1e12
                end
                ready[#ready + 1] = { e = e, use = use, rank = rank }
            elseif wait ~= nil and (least == nil or wait < least) then
                least = wait
            end
        end
    end
    table.sort(ready, function(a, b)
        if a.rank ~= b.rank then
            return a.rank < b.rank
        end
        if a.e.tier ~= b.e.tier then
            return a.e.tier < b.e.tier
        end
        return a.e.name < b.e.name
    end)
    return ready, least
end

-- Routes one job of model (its key's tenant and user) of cost in limiter
-- session s among the endpoints of routing m (ep_model; the model's own
-- when it has no fallback in use) for the worker of cache. job: pin, failed
-- (ep_name_set), deadline (ms, 0 none), recheck (true: try the endpoints
-- denied earlier in the call again, for a backfill: a cheaper job may fit
-- where the head did not). Returns what limiter_try returns,
-- plus for a grant the path, the endpoint (nil: implicit) and the model
-- served:
--   'granted', id, path, e, model
--   'denied', wait_ms, bucket, reason, level ('model': no endpoint has room;
--             'tenant'/'user': a bucket above them binds)
--   'skip', wait_ms: an endpoint this worker holds no key for could take it;
--             wait_ms: when this worker's own may (nil: not before a wake)
--   'never', bucket, reason, limit
-- An endpoint denied once is skipped for the rest of the call (cache.denied)
-- as a model is. A grant on an endpoint whose cooling is over makes it the
-- one half-open probe (probe_until set) until its settle says how it went.
local function ep_route_model(s, cache, m, model, tenant, user, cost, cost_str, job)
    local ready, least = ep_candidates(s, m, job.pin, job.failed)
    local now = s.now
    local best = nil -- the least wait of the endpoints that denied it
    local never = nil
    local other_room = false
    local own_wait = nil
    for _, r in ipairs(ready) do
        local e = r.e
        local bname = ep_bucket(model, e.name)
        local until_ms = not job.recheck and cache.denied[bname] or nil
        local serves = cache.serves[e.name]
        if until_ms ~= nil then
            local w = math.max(until_ms - now, 1)
            if best == nil or w < best.wait then
                best = { wait = w, bucket = bname, reason = 'requests' }
            end
            if serves and (own_wait == nil or w < own_wait) then
                own_wait = w
            end
        else
            local path = limiter_path(s, model, tenant, user, bname)
            if not serves then
                local b = path[1]
                if b.cfg == nil or (b.pause <= now and limiter_fits(b, cost, s.frac, now)) then
                    other_room = true
                end
            else
                local st, r1, r2, r3, r4 = limiter_try(s, path, cost, cost_str)
                if st == 'granted' then
                    if r.use == 'probe' then
                        e.probe_until = now + e.probe_ms
                        redis.call('HSET', KEY.ep_health(s.P, e.name), 'probe_until', e.probe_until)
                    end
                    return 'granted', r1, path, e, model
                elseif st == 'never' then
                    if r1 ~= bname then
                        return st, r1, r2, r3
                    end
                    never = never or { r1, r2, r3 }
                elseif r4 ~= 'model' then
                    return st, r1, r2, r3, r4 -- a tenant or user bucket binds
                else
                    cache.denied[bname] = now + r1
                    if best == nil or r1 < best.wait then
                        best = { wait = r1, bucket = r2, reason = r3 }
                    end
                    if own_wait == nil or r1 < own_wait then
                        own_wait = r1
                    end
                end
            end
        end
    end
    if other_room then
        return 'skip', own_wait or least
    end
    if best ~= nil then
        return 'denied', least ~= nil and math.min(least, best.wait) or best.wait, best.bucket,
            best.reason, 'model'
    end
    if never ~= nil and #ready > 0 then
        return 'never', never[1], never[2], never[3]
    end
    -- nothing usable: every endpoint cooling, probed or disabled
    local bucket = ep_bucket(model, m.list[1].name)
    return 'denied', least or EP_ALL_DISABLED_RECHECK_MS, bucket, 'endpoints_out', 'model', true
end

-- True when no endpoint of routing m that a job of pin (a name set or nil)
-- may use can be sent a job at now: every one cooling, probed or disabled.
local function ep_all_out(m, pin, now)
    for _, e in ipairs(m.list) do
        if (pin == nil or pin[e.name]) and ep_usable(e, now) then
            return false
        end
    end
    return true
end

-- Routes one job (see ep_route_model) of key model, falling back to the
-- model's fallback (P epfb) when every endpoint of model is out (cooling,
-- probing, disabled) or the least wait on them passes the job's deadline.
-- m: ep_model(model), nil for the implicit endpoint. job: as for
-- ep_route_model, and the job's charge as asked (job.charge: model, cost,
-- cost_str, est, and its spend budgets' verdict bv and worst case nusd,
-- lua/lib/sched_decide.lua) and job.charge_of(job, fallback), the same as
-- the fallback would run it: its own cost and its own price (nil: the job
-- may not run as that model, never tried). The fallback is
-- tried only when its budgets afford it at that price; a job over its
-- budgets as asked may still run on its fallback when every endpoint of
-- model is out and the fallback's budgets afford it. A synchronous call
-- (job.lease) its model cannot serve before its deadline and its budgets
-- refuse at the fallback's price is 'budget' with the fallback's charge (its
-- verdict naming both). Returns what
-- ep_route_model returns ('budget' for a job its budgets refuse as asked;
-- the fallback's denial when it waits for the fallback's room sooner than
-- for model's; level 'key' instead of 'model' for a job that may not run as
-- the fallback), then the charge it was decided on (the fallback's for a
-- grant there).
local function ep_route(s, cache, m, model, tenant, user, job)
    local ch = job.charge
    local st, r1, r2, r3, r4, r5
    if m == nil then
        if ch.bv ~= nil then
            return 'budget', nil, nil, nil, nil, ch
        end
        if not cache.serves[''] then
            -- others serve the implicit endpoint; a wake brings this one back
            return 'skip', nil, nil, nil, nil, ch
        end
        local path = limiter_path(s, model, tenant, user)
        st, r1, r2, r3, r4 = limiter_try(s, path, ch.cost, ch.cost_str)
        if st == 'granted' then
            return st, r1, path, nil, model, ch
        end
        return st, r1, r2, r3, r4, ch
    end
    if ch.bv == nil then
        st, r1, r2, r3, r4, r5 = ep_route_model(s, cache, m, model, tenant, user, ch.cost,
            ch.cost_str, job)
        if st == 'granted' then
            return st, r1, r2, r3, r4, ch
        end
    else
        st, r5 = 'budget', ep_all_out(m, job.pin, s.now)
    end
    local late = st == 'denied' and job.deadline > 0 and s.now + r1 >= job.deadline
    if m.fallback == nil or m.fallback == model or
        not (st == 'budget' or (st == 'denied' and r4 == 'model')) or not (r5 or late) then
        return st, r1, r2, r3, r4, ch
    end
    local fch = job.charge_of(job, m.fallback)
    if fch == nil then
        -- the job may not run as the fallback (its gateway key's models): it
        -- waits for its model, and a denial blocks its key only, as a pinned
        -- job's does: other jobs of the model may still take the fallback
        return st, r1, r2, r3, st == 'denied' and r4 == 'model' and 'key' or r4, ch
    elseif fch.bv ~= nil then
        if late and job.lease then
            -- a synchronous call (its caller waits) that its model cannot
            -- serve before its deadline and its budgets refuse at the
            -- fallback's price: waiting cannot help, it ends now with the
            -- budget's verdict as the cause (lua/lib/sched_decide.lua)
            -- (a budget the fallback's price can never fit is no reason to
            -- refuse the request: its own model may serve it later)
            fch.bv.message = model .. ' has no endpoint with room before the deadline and ' ..
                'at its fallback ' .. m.fallback .. "'s price " .. fch.bv.message
            fch.bv.kind = fch.bv.kind == 'never' and 'exhausted' or fch.bv.kind
            return 'budget', nil, nil, nil, nil, fch
        end
        return st, r1, r2, r3, r4, ch -- not at the fallback's price either: it waits as asked
    end
    local fm = ep_model(s.P, cache, m.fallback)
    local fst, f1, f2, f3, f4
    if fm == nil then
        if not cache.serves[''] then
            return st, r1, r2, r3, r4, ch
        end
        local path = limiter_path(s, m.fallback, tenant, user, m.fallback)
        fst, f1, f2, f3, f4 = limiter_try(s, path, fch.cost, fch.cost_str)
        if fst == 'granted' then
            return fst, f1, path, nil, m.fallback, fch
        end
    else
        fst, f1, f2, f3, f4 = ep_route_model(s, cache, fm, m.fallback, tenant, user, fch.cost,
            fch.cost_str, { pin = nil, failed = job.failed, deadline = job.deadline })
        if fst == 'granted' then
            return fst, f1, f2, f3, f4, fch
        end
    end
    if st == 'budget' and fst ~= 'never' then
        -- only the fallback may run it: it waits for the fallback's room
        return fst, f1, f2, f3, f4, fch
    end
    if st == 'denied' and fst == 'denied' and f4 == 'model' and f1 < r1 then
        -- model's endpoints all out (or too late) and the fallback full: it
        -- is looked at again when the fallback has room, if that comes
        -- first (not at the all-out recheck, a minute away)
        return fst, f1, f2, f3, f4, fch
    end
    return st, r1, r2, r3, r4, ch
end

-- The models endpoint name serves (its "m:<model>" fields).
local function ep_models_of(P, name)
    local out = {}
    for _, f in ipairs(redis.call('HKEYS', KEY.endpoint(P, name))) do
        local model = string.match(f, '^m:(.+)$')
        if model then
            out[#out + 1] = model
        end
    end
    return out
end

-- Nodes blocked on the buckets of model's endpoints (a model whose
-- endpoints were all out is blocked on one of them) may run now.
local function ep_wake_model(P, model)
    local buckets = {}
    for _, n in ipairs(redis.call('SMEMBERS', KEY.model_eps(P, model))) do
        buckets[#buckets + 1] = ep_bucket(model, n)
    end
    sched_wake_buckets(P, buckets)
end

-- Endpoint name's state changed (enabled, cooled, back from cooling): the
-- nodes of every model it serves look again now rather than at the wait
-- they were blocked for, and idle workers are woken.
local function ep_wake_models(P, name)
    for _, model in ipairs(ep_models_of(P, name)) do
        ep_wake_model(P, model)
    end
end

-- What settle learns about endpoint name from one call (outcome: ok | fail
-- (5xx, timeout, refused or reset, an invalid 2xx) | limit (a rate-limit
-- 429) | auth (401/403) | quota (insufficient_quota); why: the detail for a
-- disable; latency_ms >= 0 when measured). Failures past the endpoint's
-- threshold within its window, or a failed half-open probe, cool it down
-- for a back-off that doubles while it keeps failing (up to its maximum);
-- a success ends a cooling (the probe came back) and resets the back-off;
-- auth and quota disable it until `llmq endpoints enable`. A change wakes
-- the nodes of its models (ep_wake_models): those blocked until a probe's
-- time or a cooling's end look again at once. Returns the new state when it
-- changed, else nil.
local function ep_health_settle(P, name, outcome, why, latency_ms, now)
    local hk = KEY.ep_health(P, name)
    local h = redis.call('HMGET', hk, 'state', 'fails', 'fail_t0', 'cool_ms', 'lat_ms', 'cool_until')
    local state = h[1] or 'ok'
    if state == 'disabled' then
        return nil
    end
    local cfg = redis.call('HMGET', KEY.endpoint(P, name), 'fail_threshold', 'fail_window_ms',
        'cooldown_ms', 'cooldown_max_ms')
    if cfg[1] == false and redis.call('EXISTS', KEY.endpoint(P, name)) == 0 then
        return nil -- removed meanwhile
    end
    local threshold = tonumber(cfg[1]) or EP_DEFAULTS.fail_threshold
    local window = tonumber(cfg[2]) or EP_DEFAULTS.fail_window_ms
    local base = tonumber(cfg[3]) or EP_DEFAULTS.cooldown_ms
    local cap = tonumber(cfg[4]) or EP_DEFAULTS.cooldown_max_ms
    local set = {}
    local changed = nil
    if latency_ms ~= nil and latency_ms >= 0 and (outcome == 'ok' or outcome == 'limit') then
        local lat = tonumber(h[5])
        lat = lat == nil and latency_ms or math.floor(lat * 0.8 + latency_ms * 0.2 + 0.5)
        set[#set + 1], set[#set + 2] = 'lat_ms', llmq_int_text(lat)
    end
    if outcome == 'ok' then
        redis.call('HINCRBY', hk, 'n_ok', 1)
        if state == 'cooling' then
            set[#set + 1], set[#set + 2] = 'state', 'ok'
            set[#set + 1], set[#set + 2] = 'why', ''
            set[#set + 1], set[#set + 2] = 'since_ms', llmq_int_text(now)
            redis.call('HDEL', hk, 'probe_until', 'cool_until', 'cool_ms', 'fails', 'fail_t0')
            changed = 'ok'
        elseif h[2] then
            redis.call('HDEL', hk, 'fails', 'fail_t0', 'cool_ms')
        end
    elseif outcome == 'limit' then
        redis.call('HINCRBY', hk, 'n_429', 1)
    elseif outcome == 'auth' or outcome == 'quota' then
        set[#set + 1], set[#set + 2] = 'state', 'disabled'
        set[#set + 1], set[#set + 2] = 'why', why ~= '' and why or outcome
        set[#set + 1], set[#set + 2] = 'since_ms', llmq_int_text(now)
        changed = 'disabled'
    elseif outcome == 'fail' then
        redis.call('HINCRBY', hk, 'n_fail', 1)
        local fails, t0 = tonumber(h[2]) or 0, tonumber(h[3]) or 0
        if now - t0 > window then
            fails, t0 = 0, now
        end
        fails = fails + 1
        local cool_ms = tonumber(h[4]) or base
        if state == 'cooling' and now >= (tonumber(h[6]) or 0) or
            (state ~= 'cooling' and fails >= threshold) then
            -- the probe failed, or too many failures: cool down
            set[#set + 1], set[#set + 2] = 'state', 'cooling'
            set[#set + 1], set[#set + 2] = 'cool_until', llmq_int_text(now + cool_ms)
            set[#set + 1], set[#set + 2] = 'cool_ms', llmq_int_text(math.min(cool_ms * 2, cap))
            set[#set + 1], set[#set + 2] = 'why', why ~= '' and why or 'failures'
            set[#set + 1], set[#set + 2] = 'since_ms', llmq_int_text(now)
            redis.call('HDEL', hk, 'probe_until')
            fails, t0 = 0, now
            changed = 'cooling'
        end
        set[#set + 1], set[#set + 2] = 'fails', llmq_int_text(fails)
        set[#set + 1], set[#set + 2] = 'fail_t0', llmq_int_text(t0)
    end
    if #set > 0 then
        redis.call('HSET', hk, unpack(set))
    end
    if changed ~= nil then
        ep_wake_models(P, name)
    end
    return changed
end

-- True when model has an endpoint other than name that could serve a job
-- now or soon (serving model, not disabled, not cooling, inside pin, not in
-- failed): an endpoint's fault then costs the job no attempt.
local function ep_other_can_serve(P, model, name, pin, failed, now)
    local names = redis.call('SMEMBERS', KEY.model_eps(P, model))
    local cache = { eps = {} }
    for _, n in ipairs(names) do
        if n ~= name and (pin == nil or pin[n]) and (failed == nil or not failed[n]) then
            local e = ep_load(P, cache, n, nil)
            if ep_usable(e, now) == 'ok' then
                return true
            end
        end
    end
    return false
end

-- A fail or limit of endpoint name for job id of model: notes name in the
-- job's failed endpoints (field epx) and says whether another endpoint
-- (inside the job's pin, not failed it yet) can serve it: then the job goes
-- back at once and the attempt is not counted against it.
local function ep_job_elsewhere(P, id, model, name, now)
    local v = llmq_job_fields(P, id, 'pin', 'epx')
    local failed = ep_name_set(v[2]) or {}
    if not failed[name] then
        failed[name] = true
        llmq_job_set(P, id, 'epx', (v[2] and v[2] ~= '') and (v[2] .. ',' .. name) or name)
    end
    return ep_other_can_serve(P, model, name, ep_name_set(v[1]), failed, now)
end
