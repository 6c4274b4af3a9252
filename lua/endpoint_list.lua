-- endpoint_list: an account's endpoints as they are now, for `llmq endpoints
-- list` and `llmq status` (it also drops window entries that aged out).
-- KEYS[1]  P, the account prefix
-- Reply: JSON text {now_ms, endpoints: [{name, kind, base_url, api_version,
--   tier, weight, state (ok|cooling|probing|disabled), probe_next (true: ok
--   because its cooling is over, and its next request is the half-open
--   probe), why, since_ms, cool_until_ms, probe_until_ms, lat_ms, n_ok, n_fail, n_429, models: [{model, bucket,
--   deployment, requests_used, tokens_used, requests_limit, tokens_limit
--   (-1: none), period_ms, paused_ms}]}], routing: {model: strategy},
--   fallbacks: {model: model}}; empty lists and maps may come as {}.
-- uses endpoints: ep_bucket
-- uses keys: KEY
-- uses limiter: limiter_bucket, limiter_flush, limiter_session
-- uses limiter_window: window_evict, window_stale
-- uses util: llmq_hash_table, llmq_now_ms
local P = KEYS[1]
local now = llmq_now_ms()
local s = limiter_session(P, 'normal', now)
local out = { now_ms = now, endpoints = {}, routing = {}, fallbacks = {} }
for _, name in ipairs(redis.call('ZRANGE', KEY.endpoints(P), 0, -1)) do
    local cfg = llmq_hash_table(redis.call('HGETALL', KEY.endpoint(P, name)))
    local h = llmq_hash_table(redis.call('HGETALL', KEY.ep_health(P, name)))
    local e = { name = name, kind = cfg.kind or (cfg.api_version and 'azure' or 'openai'),
        base_url = cfg.base_url or '', api_version = cfg.api_version or '',
        tier = tonumber(cfg.tier) or 1, weight = tonumber(cfg.weight) or 1,
        state = h.state or 'ok', why = h.why or '', since_ms = tonumber(h.since_ms) or 0,
        cool_until_ms = tonumber(h.cool_until) or 0, probe_until_ms = tonumber(h.probe_until) or 0,
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
            if c.mode == 'gcra' then
                m.requests_used = c.requests and math.ceil((b.rtat - now) * c.requests / c.period) or 0
                m.tokens_used = c.tokens and math.ceil((b.ttat - now) * c.tokens / c.period) or 0
            else
                if window_stale(b, now) then
                    window_evict(b, now)
                end
                m.requests_used, m.tokens_used = b.n, b.tok
            end
            m.requests_limit, m.tokens_limit, m.period_ms = c.requests or -1, c.tokens or -1,
                c.period
        end
        e.models[#e.models + 1] = m
    end
    out.endpoints[#out.endpoints + 1] = e
end
out.routing = llmq_hash_table(redis.call('HGETALL', KEY.ep_routes(P)))
out.fallbacks = llmq_hash_table(redis.call('HGETALL', KEY.ep_fallbacks(P)))
limiter_flush(s)
return cjson.encode(out)
