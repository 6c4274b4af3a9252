-- What the read-only views of an account show, computed in one place so that
-- `llmq status`, `llmq endpoints list`, `llmq top` and the gateway's dashboard
-- (top_snapshot.lua) print the same numbers for the same moment: the depth
-- of a priority's queue and an account's endpoints as they are now.
-- uses endpoints: ep_bucket
-- uses jobs: LLMQ_JOBS_GROUP
-- uses keys: KEY
-- uses limiter: limiter_bucket
-- uses limiter_window: window_evict, window_stale
-- uses util: llmq_hash_table

-- What bucket b (limiter_bucket) holds at now (ms): {requests, tokens}.
-- A GCRA bucket's units still "in the bucket" are (tat - now) / emission
-- interval; a window bucket's are its live entries, after dropping those
-- that aged out. Zeros for a bucket with no limit set.
local function views_bucket_used(b, now)
    local c = b.cfg
    if c == nil then
        return 0, 0
    end
    if c.mode == 'gcra' then
        return c.requests and math.ceil((b.rtat - now) * c.requests / c.period) or 0,
            c.tokens and math.ceil((b.ttat - now) * c.tokens / c.period) or 0
    end
    if window_stale(b, now) then
        window_evict(b, now)
    end
    return b.n, b.tok
end

-- Entries of queue stream q not yet delivered to the workers' group (written
-- by a producer of the old layout or by hand, not yet adopted by dispatch):
-- those after the group's last delivered id, counted (up to
-- VIEWS_UNDELIVERED_MAX). The group's lag is not used: Redis keeps its read
-- counter apart from the last delivered id, and a replay of the AOF (the
-- XCLAIMs a script's XREADGROUP is written as move the id, not the counter)
-- or a counter set behind it leaves a lag of entries that were delivered
-- long ago (issue 24: 50 "queued" jobs that did not exist). Acknowledged
-- entries stay in the stream until trimmed (worker_ack), so XLEN would count
-- them too. Also returns that id (nil: no group).
local VIEWS_UNDELIVERED_MAX = 100000
local function views_stream_undelivered(q)
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', q)) do
        local info = llmq_hash_table(g)
        if info['name'] == LLMQ_JOBS_GROUP then
            local last = info['last-delivered-id']
            return #redis.call('XRANGE', q, '(' .. last, '+', 'COUNT', VIEWS_UNDELIVERED_MAX), last
        end
    end
    return redis.call('XLEN', q), nil
end

-- The depth of priority prio's queue: {queued, in_flight, live_from,
-- has_group}. queued = jobs waiting in the priority's keys (P backlog:<prio>)
-- plus entries written to its stream not yet adopted; in_flight = delivered,
-- not acknowledged (the group's pending entries); live_from = where the
-- stream's running and not yet adopted entries start: its oldest pending
-- entry, else after the group's last delivered one ('-' without a group).
local function views_queue_depth(P, prio)
    local q = KEY.queue(P, prio)
    local pending, undelivered = 0, redis.call('XLEN', q)
    local live_from = '-'
    local ok, pend = pcall(redis.call, 'XPENDING', q, LLMQ_JOBS_GROUP)
    if ok then
        local last
        undelivered, last = views_stream_undelivered(q)
        pending = tonumber(pend[1])
        if pending > 0 then
            live_from = pend[2]
        elseif last then
            live_from = '(' .. last
        end
    end
    return { queued = redis.call('LLEN', KEY.backlog(P, prio)) + undelivered,
        in_flight = pending, live_from = live_from, has_group = ok }
end

-- An account's endpoints as they are now (the reply of endpoint_list.lua,
-- as a table), read through limiter session s at now (ms); drops window
-- entries that aged out.
local function views_endpoints(P, s, now)
    local out = { now_ms = now, endpoints = {}, routing = {}, fallbacks = {} }
    for _, name in ipairs(redis.call('ZRANGE', KEY.endpoints(P), 0, -1)) do
        local cfg = llmq_hash_table(redis.call('HGETALL', KEY.endpoint(P, name)))
        local h = llmq_hash_table(redis.call('HGETALL', KEY.ep_health(P, name)))
        local e = { name = name, kind = cfg.kind or (cfg.api_version and 'azure' or 'openai'),
            base_url = cfg.base_url or '', api_version = cfg.api_version or '',
            tier = tonumber(cfg.tier) or 1, weight = tonumber(cfg.weight) or 1,
            state = h.state or 'ok', why = h.why or '', since_ms = tonumber(h.since_ms) or 0,
            cool_until_ms = tonumber(h.cool_until) or 0,
            probe_until_ms = tonumber(h.probe_until) or 0,
            lat_ms = tonumber(h.lat_ms) or -1, n_ok = tonumber(h.n_ok) or 0,
            n_fail = tonumber(h.n_fail) or 0, n_429 = tonumber(h.n_429) or 0, models = {},
            probe_next = false }
        -- Its hash says cooling until the probe settles; past cool_until it is
        -- probing (one request in flight) or usable again (ep_usable: 'probe').
        if e.state == 'cooling' and now >= e.cool_until_ms then
            if now < e.probe_until_ms then
                e.state = 'probing'
            else
                e.state, e.probe_next = 'ok', true
            end
        end
        local models = {}
        for f in pairs(cfg) do
            local model = string.match(f, '^m:(.+)$')
            if model then
                models[#models + 1] = model
            end
        end
        table.sort(models)
        for _, model in ipairs(models) do
            local b = limiter_bucket(s, ep_bucket(model, name))
            local c = b.cfg
            local m = { model = model, bucket = b.name, deployment = cfg['dep:' .. model] or model,
                requests_used = 0, tokens_used = 0, requests_limit = -1, tokens_limit = -1,
                period_ms = 0, paused_ms = math.max(b.pause - now, 0) }
            if c ~= nil then
                m.requests_used, m.tokens_used = views_bucket_used(b, now)
                m.requests_limit, m.tokens_limit, m.period_ms = c.requests or -1, c.tokens or -1,
                    c.period
            end
            e.models[#e.models + 1] = m
        end
        out.endpoints[#out.endpoints + 1] = e
    end
    out.routing = llmq_hash_table(redis.call('HGETALL', KEY.ep_routes(P)))
    out.fallbacks = llmq_hash_table(redis.call('HGETALL', KEY.ep_fallbacks(P)))
    return out
end
