-- The limiter core shared by acquire, settle, refund, pause, usage and the
-- worker's dispatch. P is the account's key prefix "llmq:{ACCOUNT}:"; key
-- layout in common/redis/keys.h. All times are ms from Redis TIME (llmq_now_ms).
--
-- A bucket limits requests and/or tokens over period_ms, in one of two modes:
--   window: exact sliding window (lua/lib/limiter_window.lua), each
--           admission held for one period plus the arrival guard;
--   gcra:   continuous refill (lua/lib/limiter_gcra.lua).
-- A pause (ms) denies every acquire until it passes. What OpenAI's headers
-- and 429s teach a bucket is lua/lib/limiter_learn.lua.
--
-- What a bucket is charged (its ledger, cfg.settle): by default what the API
-- counts at admission (the request's cost: prompt + completion reservation +
-- margin) for the whole hold; settling may raise the charge to real usage
-- above it, never lower it ('admission'). A bucket set to 'usage' replaces
-- the charge with the real usage, up or down (APIs that give the unused
-- reservation back). The choice is made at admission and travels in the
-- reservation handle: tag 'w'/'g' (window/gcra, admission ledger), 'W'/'G'
-- (usage ledger). A refund (the API did not admit the request: a 429, a
-- hand-back) gives everything back under either ledger.
--
-- A session decides many requests in one script call: bucket state is read
-- once, updated in Lua, and written back by limiter_flush.
-- uses handle: handle_admitted, handle_bucket_tag, handle_buckets, handle_cost, handle_has_usage
-- uses handle: handle_limiter
-- uses handle: handle_limiter_decode
-- uses keys: KEY
-- uses limiter_gcra: gcra_fits, gcra_record, gcra_settle, gcra_use, gcra_wait, gcra_write
-- uses limiter_window: guard_allowance, guard_part, guard_unseen, window_evict, window_fits
-- uses limiter_window: window_member_tokens, window_record, window_settle, window_stale
-- uses limiter_window: window_use, window_wait
-- uses limiter_window: window_write, window_write_log
-- uses util: llmq_int_text

-- Configuration fields first (CONFIG_FIELDS of them: a default bucket is read
-- for those only), then live state.
local BUCKET_FIELDS = { 'requests', 'tokens', 'period_ms', 'mode', 'burst_requests',
    'burst_tokens', 'soft', 'settle', 'tok', 'n', 'oldest', 'pause', 'rtat', 'ttat', 'exp',
    'learned_requests', 'learned_tokens', 'learned_until', 'allowance_ms', 'allowance_at',
    'lifetime_ms', 'lifetime_at', 'guard_born_ms', 'late_ms', 'late_prev_ms', 'late_at',
    'oldest_arrived' }
local CONFIG_FIELDS = 8

local HEADROOM_FIELDS = { high = 'headroom_high', normal = 'headroom_normal', low = 'headroom_low' }
local HEADROOM_DEFAULTS = { high = 100, normal = 100, low = 80 }

-- A new session at now for priority prio: policy read once.
local function limiter_session(P, prio, now)
    if HEADROOM_FIELDS[prio] == nil then
        prio = 'normal'
    end
    local v = redis.call('HMGET', KEY.policy(P), HEADROOM_FIELDS[prio], 'soft_threshold',
        'window_guard_ms', 'users_by_tenant_ms')
    local users_since = tonumber(v[4])
    if users_since == nil then
        -- the first call of a version with a bucket per tenant's user
        -- (limiter_inherit_shared): once per account
        users_since = now
        redis.call('HSET', KEY.policy(P), 'users_by_tenant_ms', llmq_int_text(now))
    end
    return {
        P = P,
        now = now,
        now_text = llmq_int_text(now),
        frac = (tonumber(v[1]) or HEADROOM_DEFAULTS[prio]) / 100,
        soft_threshold = (tonumber(v[2]) or 80) / 100,
        pinned_guard = tonumber(v[3]), -- nil: each model's guard is learned
        users_since = users_since,
        buckets = {},
        ids_next = 1,
        ids_last = 0,
    }
end

-- Config of a bucket from HMGET values v (or nil when it sets no limit);
-- hold is the period until limiter_bucket adds a window's guard.
local function limiter_parse_config(v)
    local requests, tokens = tonumber(v[1]), tonumber(v[2])
    -- 0 is no limit on that dimension (as openai-sim's --rpm 0; `llmq limits
    -- set` stores none), never a limit that nothing fits
    if requests == 0 then requests = nil end
    if tokens == 0 then tokens = nil end
    if requests == nil and tokens == nil then
        return nil
    end
    local period, mode = tonumber(v[3]) or 60000, v[4] or 'window'
    return {
        requests = requests,
        tokens = tokens,
        period = period,
        mode = mode,
        burst_requests = tonumber(v[5]) or requests,
        burst_tokens = tonumber(v[6]) or tokens,
        soft = v[7] == '1',
        settle = v[8] == 'usage' and 'usage' or 'admission',
        guard = 0,
        hold = period,
    }
end

-- The bucket of user of tenant under model (common/redis/keys.h): a user is
-- a user of its tenant, so two tenants' users of one name never share a
-- bucket; a user without a tenant has "<model>/u/<user>", a name no
-- tenant's user can have (tenant names are never empty and hold no '/').
local function limiter_user_bucket(model, tenant, user)
    if tenant == nil or tenant == '' then
        return model .. '/u/' .. user
    end
    return model .. '/t/' .. tenant .. '/u/' .. user
end

-- The level of bucket name: 'model' ("<model>"), 'user' (a name with
-- "/u/"), else 'tenant'. Names hold no '/' of their own.
local function limiter_level(name)
    if not string.find(name, '/', 1, true) then
        return 'model'
    end
    return string.find(name, '/u/', 1, true) and 'user' or 'tenant'
end

-- The buckets whose limit (and fair-share weight) a tenant or user bucket
-- without one of its own takes, most specific first: "<model>/t/<tenant>"
-- -> "<model>/t/*"; "<model>/u/<user>" (the limit of that user in every
-- tenant, and of that user without a tenant) -> "<model>/u/*";
-- "<model>/t/<tenant>/u/<user>" -> that tenant's default for its users
-- "<model>/t/<tenant>/u/*", then "<model>/u/<user>", then "<model>/u/*".
-- Empty for a model bucket.
local function limiter_default_names(name)
    local model, rest = string.match(name, '^([^/]+)/(.+)$')
    if model == nil then
        return {}
    end
    local tenant, user = string.match(rest, '^t/([^/]+)/u/(.+)$')
    if tenant == nil then
        return { model .. '/' .. string.sub(rest, 1, 2) .. '*' }
    elseif user == '*' then
        return { model .. '/u/*' }
    end
    return { model .. '/t/' .. tenant .. '/u/*', model .. '/u/' .. user, model .. '/u/*' }
end

-- The configuration fields of default bucket name, read once per session.
local function limiter_default_values(s, name)
    s.defaults = s.defaults or {}
    local v = s.defaults[name]
    if v == nil then
        v = redis.call('HMGET', KEY.limit(s.P, name), unpack(BUCKET_FIELDS, 1, CONFIG_FIELDS))
        s.defaults[name] = v
    end
    return v
end

-- Older versions kept one bucket "<model>/u/<user>" for that user of every
-- tenant (docs/upgrading.md). A tenant's user bucket b that has no state
-- yet, while admissions made before this version's first call (P policy
-- users_by_tenant_ms, s.users_since) may still count, starts with those of
-- the shared bucket: the user of each tenant is charged what the user of
-- any tenant was admitted before the upgrade, so no one gets a budget twice
-- across it. Costs a read only for new buckets within one hold of the
-- upgrade; refunds of those old reservations reach the shared bucket only
-- (the copies age out).
local function limiter_inherit_shared(s, b)
    local c = b.cfg
    local model, user = string.match(b.name, '^([^/]+)/t/[^/]+/u/(.+)$')
    if c == nil or model == nil or s.users_since == nil or s.now - c.hold > s.users_since then
        return
    end
    local shared = model .. '/u/' .. user
    if c.mode == 'gcra' then
        local v = redis.call('HMGET', KEY.limit(s.P, shared), 'rtat', 'ttat')
        b.rtat = math.max(b.rtat, tonumber(v[1]) or 0)
        b.ttat = math.max(b.ttat, tonumber(v[2]) or 0)
        b.dirty = true
        return
    end
    local old = redis.call('ZRANGEBYSCORE', KEY.window_log(s.P, shared), '(' .. (s.now - c.hold),
        '(' .. s.users_since, 'WITHSCORES')
    for i = 1, #old, 2 do
        window_record(b, old[i], window_member_tokens(old[i]), tonumber(old[i + 1]), old[i + 1])
    end
    -- settled ones (scored by their arrival, admitted before it) count here
    -- from their arrival for a hold: longer than they need, never shorter
    old = redis.call('ZRANGEBYSCORE', KEY.arrived_log(s.P, shared), '(' .. (s.now - c.period),
        '(' .. (s.users_since + c.hold), 'WITHSCORES')
    for i = 1, #old, 2 do
        window_record(b, old[i], window_member_tokens(old[i]), tonumber(old[i + 1]), old[i + 1])
    end
end

-- Bucket name's live state in session s (cached per session). A bucket with
-- neither a limit (own or default) nor a pause has b.live = false.
local function limiter_bucket(s, name)
    local b = s.buckets[name]
    if b ~= nil then
        return b
    end
    local level = limiter_level(name)
    local key = KEY.limit(s.P, name)
    local v = redis.call('HMGET', key, unpack(BUCKET_FIELDS))
    local cfg = limiter_parse_config(v)
    local owns_config = cfg ~= nil
    if cfg == nil and level ~= 'model' then
        for _, dname in ipairs(limiter_default_names(name)) do
            cfg = limiter_parse_config(limiter_default_values(s, dname))
            if cfg ~= nil then
                break
            end
        end
    end
    local allowance_at, lifetime_at = tonumber(v[20]), tonumber(v[22])
    local born_new = false
    if cfg ~= nil and cfg.mode ~= 'gcra' then
        local slash = string.find(name, '/', 1, true)
        local m = slash ~= nil and limiter_bucket(s, string.sub(name, 1, slash - 1)).cfg
        if m and m.mode ~= 'gcra' then -- a tenant's or user's: its model's
            cfg.lifetime, cfg.allowance = m.lifetime, m.allowance
        elseif slash == nil then
            cfg.lifetime = guard_part('lifetime', cfg.period, tonumber(v[21]), lifetime_at, s.now)
            local late = v[26] and math.max(tonumber(v[24]) or 0, tonumber(v[25]) or 0) or nil
            cfg.allowance = guard_allowance(cfg.period, cfg.lifetime, tonumber(v[19]),
                allowance_at, late, tonumber(v[23]), s.now)
            born_new = not v[23]
        else
            cfg.lifetime = guard_part('lifetime', cfg.period, nil, nil, s.now)
            cfg.allowance = guard_part('allowance', cfg.period, nil, nil, s.now)
        end
        cfg.guard = s.pinned_guard or cfg.lifetime + cfg.allowance
        cfg.hold = cfg.period + cfg.guard
    end
    local now = s.now
    local pause = tonumber(v[12]) or 0
    local rtat, ttat = tonumber(v[13]) or 0, tonumber(v[14]) or 0
    -- one constructor: the table is sized once (adds: pending ZADD arguments)
    local oldest, oldest_arrived = tonumber(v[11]), tonumber(v[27])
    b = { name = name, level = level, key = key, wkey = KEY.window_log(s.P, name),
        akey = KEY.arrived_log(s.P, name), cfg = cfg,
        owns_config = owns_config, tok = tonumber(v[9]) or 0, n = tonumber(v[10]) or 0,
        -- 0: none (window_write)
        oldest = oldest ~= 0 and oldest or nil,
        oldest_arrived = oldest_arrived ~= 0 and oldest_arrived or nil,
        pause = pause, pause_loaded = pause,
        exp = tonumber(v[15]) or 0, allowance_at = allowance_at, lifetime_at = lifetime_at,
        rtat = rtat > now and rtat or now,
        ttat = ttat > now and ttat or now, adds = {}, live = cfg ~= nil or pause > now,
        born_new = born_new,
        dirty = false, binds = false, soft = false }
    -- Limits the API reported lower than configured (limiter_learn) bind
    -- until they are re-learned or lapse.
    if cfg ~= nil and v[18] and (tonumber(v[18]) or 0) > now then
        local lr, lt = tonumber(v[16]), tonumber(v[17])
        local c = cfg
        if lr and c.requests and lr < c.requests then
            c.requests, c.burst_requests = lr, math.min(c.burst_requests, lr)
        end
        if lt and c.tokens and lt < c.tokens then
            c.tokens, c.burst_tokens = lt, math.min(c.burst_tokens, lt)
        end
    end
    if level == 'user' and not (v[10] or v[13] or v[14]) then
        limiter_inherit_shared(s, b) -- no state yet (never used, or expired)
    end
    s.buckets[name] = b
    return b
end

-- The path of (model, tenant, user) in session s, account+model first,
-- cached per session. head: the first bucket when it is not the model's own
-- (an endpoint's "<model>@<endpoint>", lua/lib/endpoints.lua; tenant and
-- user buckets stay the model's). path.tags is the tags of the buckets
-- that record admissions (handle_bucket_tag: mode and ledger), the tail of
-- a reservation handle's limiter part (lua/lib/handle.lua).
local function limiter_path(s, model, tenant, user, head)
    local pkey = (head or model) .. '|' .. (tenant or '') .. '|' .. (user or '')
    s.paths = s.paths or {}
    local path = s.paths[pkey]
    if path ~= nil then
        return path
    end
    path = { limiter_bucket(s, head or model) }
    if tenant ~= nil and tenant ~= '' then
        path[#path + 1] = limiter_bucket(s, model .. '/t/' .. tenant)
    end
    if user ~= nil and user ~= '' then
        path[#path + 1] = limiter_bucket(s, limiter_user_bucket(model, tenant, user))
    end
    local tags = ''
    path.has_soft = false
    for i = 1, #path do
        local b = path[i]
        local c = b.cfg
        if c ~= nil then
            tags = tags .. handle_bucket_tag(c.mode, c.settle == 'usage', b.name)
            b.soft = c.soft and b.level ~= 'model'
            path.has_soft = path.has_soft or b.soft
        end
    end
    path.tags = tags
    s.paths[pkey] = path
    return path
end

-- Whether cost fits b at headroom frac by the cached counters. Headroom: a
-- priority may fill only frac of a limit, but an idle bucket admits any cost
-- within the whole limit (or a large low-priority job would wait forever).
local function limiter_fits(b, cost, frac, now)
    local c = b.cfg
    if c == nil then
        return true
    end
    if c.mode == 'gcra' then
        return gcra_fits(b, c, cost, frac, now)
    end
    return window_fits(b, c, cost, frac)
end

-- Fraction of b's limit in use (max over its dimensions), for soft limits.
local function limiter_use(b, now)
    local c = b.cfg
    if c == nil then
        return 0
    end
    if c.mode == 'gcra' then
        return gcra_use(b, c, now)
    end
    return window_use(b, c)
end

-- Ms until cost fits b (exact; the log must be evicted and written), and the
-- binding dimension.
local function limiter_wait(b, cost, frac, now)
    local c = b.cfg
    local wait, dim = 0, nil
    if b.pause > now then
        wait, dim = b.pause - now, 'pause'
    end
    if c == nil then
        return wait, dim
    end
    if c.mode == 'gcra' then
        return gcra_wait(b, c, cost, frac, now, wait, dim)
    end
    return window_wait(b, c, cost, frac, now, wait, dim)
end

-- Dimension and limit when cost can never fit hard bucket b, else nil.
local function limiter_never_fits(b, cost)
    local c = b.cfg
    if c == nil or (c.soft and b.level ~= 'model') then
        return nil -- a soft bucket can borrow; an idle one takes any cost
    end
    local req_cap = c.mode == 'gcra' and c.burst_requests or c.requests
    local tok_cap = c.mode == 'gcra' and c.burst_tokens or c.tokens
    if req_cap ~= nil and req_cap < 1 then
        return 'requests', req_cap
    end
    if tok_cap ~= nil and cost > tok_cap then
        return 'tokens', tok_cap
    end
    return nil
end

-- Reserves k consecutive reservation ids for session s (one INCRBY per
-- call); limiter_new_id hands them out. Ids left unused are skipped.
local function limiter_reserve_ids(s, k)
    s.ids_last = redis.call('INCRBY', KEY.seq(s.P), k)
    s.ids_next = s.ids_last - k + 1
    return s.ids_next
end

local function limiter_new_id(s)
    if s.ids_next > s.ids_last then
        limiter_reserve_ids(s, 64)
    end
    local id = s.ids_next
    s.ids_next = id + 1
    return id
end

-- Records an admission of cost (cost_str: its decimal text) with member text
-- "<id>:<cost>" in b at now (now_text: its decimal text, the log's score) (in
-- memory; limiter_flush writes it).
local function limiter_record(b, member, cost, now, now_text)
    local c = b.cfg
    if c == nil then
        return
    end
    b.dirty = true
    if c.mode == 'gcra' then
        gcra_record(b, c, cost)
        return
    end
    window_record(b, member, cost, now, now_text)
end

-- Decides one request of cost on path (from limiter_path) in session s.
-- Returns 'granted', id | 'denied', wait_ms, bucket, reason, level |
-- 'never', bucket, reason, limit. The reservation handle of a grant is
-- limiter_handle's. Soft buckets bind only
-- while the account+model bucket's use is at or above the soft threshold;
-- they record admissions either way, so their use is known when they bind.
local function limiter_try(s, path, cost, cost_str)
    local now = s.now
    for i = 1, #path do
        local b = path[i]
        if b.cfg ~= nil then
            local dim, limit = limiter_never_fits(b, cost)
            if dim ~= nil then
                return 'never', b.name, dim, limit
            end
        end
    end
    local contended = true
    if path.has_soft and path[1].cfg ~= nil then
        if window_stale(path[1], now) then
            window_evict(path[1], now)
        end
        contended = limiter_use(path[1], now) >= s.soft_threshold
    end
    local blocked = false
    for i = 1, #path do
        local b = path[i]
        b.binds = false
        if b.live and not (b.soft and not contended) then
            if b.cfg ~= nil and window_stale(b, now) and
                (not limiter_fits(b, cost, s.frac, now) or window_stale(b, now, 1.25)) then
                window_evict(b, now)
            end
            b.binds = b.pause > now or not limiter_fits(b, cost, s.frac, now)
            blocked = blocked or b.binds
        end
    end
    if blocked then
        local worst = nil
        for i = 1, #path do
            local b = path[i]
            if b.binds then
                local w, dim = limiter_wait(b, cost, s.frac, now)
                if worst == nil or w > worst.wait then
                    worst = { wait = math.max(w, 1), bucket = b.name, reason = dim, level = b.level }
                end
            end
        end
        return 'denied', worst.wait, worst.bucket, worst.reason, worst.level
    end
    local id = limiter_new_id(s)
    local member = llmq_int_text(id) .. ':' .. cost_str
    for i = 1, #path do
        limiter_record(path[i], member, cost, now, s.now_text)
    end
    return 'granted', id
end

-- The reservation handle of grant id of cost on path at now (now_text: its
-- decimal text).
local function limiter_handle(path, id, cost_str, now_text)
    return handle_limiter(id, cost_str, now_text, path.tags)
end

-- Pauses bucket name until now + ms (a later pause wins over an earlier one).
-- Returns the pause's end.
local function limiter_pause(P, name, ms, now)
    local key = KEY.limit(P, name)
    local untl = now + ms
    local cur = tonumber(redis.call('HGET', key, 'pause')) or 0
    if untl > cur then
        redis.call('HSET', key, 'pause', untl)
        -- A hash without limits of its own is state only: it must outlive the
        -- pause, then go. One with limits is configuration and stays.
        local v = redis.call('HMGET', key, 'requests', 'tokens')
        if not v[1] and not v[2] then
            local ttl = redis.call('PTTL', key)
            if ttl < ms then
                redis.call('PEXPIRE', key, ms + 1)
            end
        end
    end
    return math.max(untl, cur)
end

-- Pauses bucket b of session s until s.now + ms (a later pause wins);
-- limiter_flush writes it.
local function limiter_bucket_pause(s, b, ms)
    if ms > 0 and s.now + ms > b.pause then
        b.pause = s.now + ms
        b.live = true
    end
end

-- Writes every changed bucket of session s back to Redis. Keys live at least
-- until nothing in them counts; a bucket hash that holds its own limits is
-- configuration and never expires.
local function limiter_flush(s)
    local now = s.now
    for _, b in pairs(s.buckets) do
        if b.pause > b.pause_loaded then
            if b.cfg == nil then
                limiter_pause(s.P, b.name, b.pause - now, now)
            else
                redis.call('HSET', b.key, 'pause', b.pause)
                b.dirty = true
            end
            b.pause_loaded = b.pause
        end
        if b.dirty and b.cfg ~= nil then
            window_write_log(b)
            local until_ms
            if b.cfg.mode == 'gcra' then
                until_ms = gcra_write(b)
            else
                until_ms = window_write(b, now)
            end
            until_ms = math.max(until_ms, b.pause)
            if b.exp < until_ms then
                -- Refresh TTLs rarely: give them a period of slack.
                local exp = math.ceil(until_ms + b.cfg.period)
                redis.call('HSET', b.key, 'exp', exp)
                redis.call('PEXPIREAT', b.wkey, exp)
                redis.call('PEXPIREAT', b.akey, exp)
                if not b.owns_config then
                    redis.call('PEXPIREAT', b.key, exp)
                end
            end
        end
    end
end

-- The latest arrival at the API (ms) of a call admitted at admitted into
-- window bucket b (session s) that was at most late ms late (measured,
-- an upper bound up to the API's answer) and b's period; nil when b is no
-- window bucket (any more). The API may count the request a little after
-- the worker's last sight of it (guard_unseen); a pinned guard bounds the
-- lateness as the policy says.
local function limiter_arrival(s, b, admitted, late)
    local c = b.cfg
    if c == nil or c.mode == 'gcra' then
        return nil
    end
    local arrived = admitted + late + guard_unseen(c.period)
    if s.pinned_guard ~= nil then
        arrived = math.min(arrived, admitted + s.pinned_guard)
    end
    return arrived, c.period
end

-- Settles the reservation of handle (its limiter part): actual tokens (integer >= 0) raise the
-- charge of an admission-ledger bucket to actual when it exceeds the
-- reserved cost, and replace it (up or down) in a usage-ledger bucket;
-- actual = nil refunds it (its request and its tokens) in every bucket.
-- Window entries that already aged out are left alone: they no longer count.
-- Returns the number of buckets whose reservation was still counted, the
-- names of those whose charge went down (room given back: the scheduler
-- wakes what waits on them, sched_wake_buckets), and those whose entry now
-- ends sooner, as {name, new end ms} (nil: none; the scheduler brings what
-- waits on them forward, sched_sooner_buckets). quiet: the caller does not
-- need that count, so a bucket whose charge stays as it is is not looked up
-- at all (the common settle: usage within the reservation).
-- late (ms >= 0, with actual; nil: not measured): how late the call may have
-- reached the API after its admission at the latest (job_settle's late_ms),
-- at now: each window bucket's entry then counts one period from that
-- arrival (limiter_arrival) instead of one hold from its admission.
local LIMITER_NONE_FREED = {} -- limiter_adjust's freed list when nothing was (never written)
local function limiter_adjust(P, handle, actual, quiet, late, now)
    if late ~= nil and (actual == nil or late < 0) then
        late = nil
    end
    if quiet and late == nil and actual ~= nil and not handle_has_usage(handle) then
        -- Only admission-ledger buckets: a usage within the charge changes
        -- none of them (the common settle), so nothing is parsed or looked up.
        local c = handle_cost(handle)
        if c ~= nil and actual <= c then
            return 0, LIMITER_NONE_FREED, nil
        end
    end
    local resid, cost, tags = handle_limiter_decode(handle)
    local admitted = late ~= nil and handle_admitted(handle) or nil
    local s = nil -- a session, for the buckets' periods when late is given
    local adjusted, freed, sooner_list = 0, {}, nil
    for _, tag in ipairs(handle_buckets(tags)) do
        local mode, name = tag[1], tag[2]
        local key = KEY.limit(P, name)
        local to = actual
        if to ~= nil and (mode == 'w' or mode == 'g') and to < cost then
            to = cost -- the admission ledger never lowers a charge
        end
        local counted, sooner = false, nil
        if quiet and to == cost and admitted == nil then
            -- nothing to change in this bucket
        elseif mode == 'w' or mode == 'W' then
            local w = { key = key, wkey = KEY.window_log(P, name),
                akey = KEY.arrived_log(P, name) }
            local arrived = nil
            if admitted ~= nil then
                s = s or limiter_session(P, 'normal', now)
                local b = limiter_bucket(s, name)
                arrived, w.period = limiter_arrival(s, b, admitted, late)
                w.hold = arrived and b.cfg.hold
            end
            counted, sooner = window_settle(w, resid, cost, to, arrived)
        else
            local s = { P = P, now = 0, buckets = {} }
            local b = limiter_bucket(s, name)
            if b.cfg ~= nil and redis.call('EXISTS', key) == 1 then
                gcra_settle(key, b.cfg, cost, to)
                counted = true
            end
        end
        if counted then
            adjusted = adjusted + 1
            if to == nil or to < cost then
                freed[#freed + 1] = name
            elseif sooner ~= nil then
                sooner_list = sooner_list or {}
                sooner_list[#sooner_list + 1] = { name, sooner }
            end
        end
    end
    return adjusted, freed, sooner_list
end

-- The lifetime (ms) of a grant on path (limiter_path): the worker sends it
-- only this long after it asked; 0 when no window bucket is on the path
-- (nothing to arrive late for). The model bucket's, or the first window
-- bucket's when the model sets no window.
local function limiter_grant_lifetime(path)
    for i = 1, #path do
        local c = path[i].cfg
        if c ~= nil and c.mode ~= 'gcra' then
            return c.lifetime
        end
    end
    return 0
end

-- Flat limits of path's buckets for the caller's local fail-open cache:
-- {name, requests, tokens, period_ms, ...} with -1 for "no limit", appended
-- to out (a new table when nil).
local function limiter_limits_flat(path, out)
    out = out or {}
    for i = 1, #path do
        local c = path[i].cfg
        if c ~= nil then
            out[#out + 1] = path[i].name
            out[#out + 1] = c.requests or -1
            out[#out + 1] = c.tokens or -1
            out[#out + 1] = c.hold
        end
    end
    return out
end
