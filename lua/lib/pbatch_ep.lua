-- Offload on endpoints (docs/DESIGN.md §3.10): which endpoint a new provider
-- batch of a model goes to, and the file limits there. A provider batch
-- belongs to one endpoint: the implicit one (the worker's own base URL and
-- the account's key; bucket "<model>") for a model no named endpoint
-- serves, else one of the model's named endpoints (`llmq limits set MODEL
-- --endpoint NAME`; bucket "<model>@<name>"), the one its jobs would run on.
-- The batch records the endpoint's name, URL, Azure api-version and
-- deployment when it is made (pb:<id> fields ep, ep_url, ep_ver, ep_dep), so
-- every later step of it goes to the provider that holds it, and only a
-- worker holding that endpoint's key takes those steps.
-- uses endpoints: ep_model, ep_usable, ep_bucket, ep_name_set
-- uses keys: KEY
-- uses pbatch: pbatch_queue

-- OpenAI's limits of one input file, an endpoint's unless it sets its own
-- (`llmq endpoints add|set --batch-max-requests N --batch-max-bytes N`).
local PBATCH_EP_MAX_REQUESTS = 50000
local PBATCH_EP_MAX_BYTES = 200 * 1000 * 1000

-- True when worker cache (ep_cache_new of the worker's endpoint names) may
-- take the steps of provider batch id of account P: it holds the key of
-- the batch's endpoint (field ep; '' or none: the implicit endpoint).
local function pbatch_ep_served(P, cache, id)
    local ep = redis.call('HGET', KEY.pbatch(P, id), 'ep')
    return cache.serves[ep or ''] == true
end

-- The endpoints a new provider batch of model may go to for the worker of
-- cache at now, best first: those it holds a key for, usable (not disabled,
-- not cooling: a cooling whose time is over counts, as no live call may
-- come to probe it when every job of the model is offloaded), whose batch
-- queue (P pbq:<bucket>) is not held after a token_limit_exceeded nor full.
-- Order: tier (spillover and fastest: a batch has no latency of its own to
-- rank; balanced: every tier alike), then the fewest tokens enqueued, then
-- the name; so endpoints of one tier share the batches. Each choice:
-- { name ('' implicit), bucket, q (pbatch_queue), e (nil implicit) }.
-- Second value: the model's routing (nil: the implicit endpoint).
local function pbatch_ep_choices(P, cache, model, now)
    local m = ep_model(P, cache, model)
    local out = {}
    local function add(name, e)
        local bucket = ep_bucket(model, name)
        local q = pbatch_queue(P, bucket, now)
        if q.hold <= now and (q.limit == nil or q.used < q.limit or q.used == 0) then
            out[#out + 1] = { name = name, bucket = bucket, q = q, e = e,
                rank = (m ~= nil and m.strategy ~= 'balanced') and e.tier or 0 }
        end
    end
    if m == nil then
        if cache.serves[''] then
            add('', nil)
        end
        return out, nil
    end
    for _, e in ipairs(m.list) do
        if cache.serves[e.name] and ep_usable(e, now) then
            add(e.name, e)
        end
    end
    table.sort(out, function(a, b)
        if a.rank ~= b.rank then
            return a.rank < b.rank
        end
        if a.q.used ~= b.q.used then
            return a.q.used < b.q.used
        end
        return a.name < b.name
    end)
    return out, m
end

-- Whether staged job id (pin: its job field, '' or nil none) may be put in
-- a batch on choice c (pbatch_ep_choices) with room (nil: no limit) left
-- in its queue of which used tokens are charged, its estimated tokens t:
-- 'ok'; 'full' (its queue has no room for it); 'pin' (its pin excludes c).
local function pbatch_ep_fits(c, pin, t, room, used)
    if pin ~= nil and not pin[c.name] then
        return 'pin'
    end
    if room ~= nil and t > room and used > 0 then
        return 'full'
    end
    return 'ok'
end

-- For a staged job of model with pin text (its job field), among choices
-- (pbatch_ep_choices; m the model's routing): the first choice it fits
-- with its t tokens, or nil and why: 'full' (a choice it may use has no
-- room now: it waits), 'elsewhere' (only endpoints this worker may not use
-- now could take it: it is left for them), 'none' (no endpoint of the
-- model is in its pin, or it names endpoints and the model has none: it
-- can never run, as a live job so pinned cannot).
local function pbatch_ep_pick(choices, m, pin_text, t)
    local pin = ep_name_set(pin_text)
    if pin ~= nil then
        local any = false
        for _, e in ipairs(m ~= nil and m.list or {}) do
            any = any or pin[e.name] == true
        end
        if not any then
            return nil, 'none'
        end
    end
    local why = 'elsewhere'
    for _, c in ipairs(choices) do
        local room = c.q.limit and (c.q.limit - c.q.used) or nil
        local f = pbatch_ep_fits(c, pin, t, room, c.q.used)
        if f == 'ok' then
            return c, nil
        elseif f == 'full' then
            why = 'full'
        end
    end
    return nil, why
end

-- The input file limits of a batch on choice c under policy pol: the
-- smaller of the policy's (`llmq offload set --max-requests/--max-bytes`)
-- and the endpoint's (OpenAI's unless it sets its own). Returns
-- max_requests, max_bytes.
local function pbatch_ep_limits(P, c, pol)
    local mr, mb = PBATCH_EP_MAX_REQUESTS, PBATCH_EP_MAX_BYTES
    if c.e ~= nil then
        local v = redis.call('HMGET', KEY.endpoint(P, c.name), 'batch_max_requests',
            'batch_max_bytes')
        mr = tonumber(v[1]) or mr
        mb = tonumber(v[2]) or mb
    end
    return math.max(1, math.min(math.floor(pol.max_requests), mr)),
        math.max(1, math.min(math.floor(pol.max_bytes), mb))
end

-- The fields a new batch on choice c records (flat field, value list):
-- the endpoint's name, and for a named one its base URL, Azure
-- api-version ('' OpenAI style) and deployment of model.
local function pbatch_ep_fields(c, model)
    if c.e == nil then
        return { 'ep', '' }
    end
    return { 'ep', c.name, 'ep_url', c.e.base_url, 'ep_ver', c.e.api_version, 'ep_dep',
        c.e.deps[model] or model }
end
