-- The limiter core shared by acquire, settle, refund, pause, usage and the
-- worker's dispatch. P is the account's key prefix "llmq:{ACCOUNT}:"; key
-- layout in common/redis/keys.h. All times are ms from Redis TIME (llmq_now_ms).
--
-- A bucket limits requests and/or tokens over period_ms, in one of two modes:
--   window: exact sliding window. Each admission is a member
--           "<resid>:<tokens>" of the ZSET bw:<bucket>, scored by its admission
--           time; it counts for its hold: one period plus the arrival guard
--           (while score > now - hold; cfg.hold = period + cfg.guard, below):
--           a request reaches the API some ms after its admission, by a delay
--           that varies, and the API's window starts at arrival.
--           The bucket hash caches n, tok (count and token sum of the members)
--           and oldest (earliest score). Entries that aged out are dropped
--           lazily: always before a decision they could change (the cached sums
--           overcount, so "fits by the cache" is exact), and otherwise once
--           they are a quarter period stale, which bounds memory.
--   gcra:   continuous refill: per dimension a theoretical arrival time
--           (rtat, ttat); O(1) state; burst = capacity, default the limit.
-- A pause (ms) denies every acquire until it passes.
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

-- Configuration fields first (CONFIG_FIELDS of them: a default bucket is read
-- for those only), then live state.
local BUCKET_FIELDS = { 'requests', 'tokens', 'period_ms', 'mode', 'burst_requests',
    'burst_tokens', 'soft', 'settle', 'tok', 'n', 'oldest', 'pause', 'rtat', 'ttat', 'exp',
    'learned_requests', 'learned_tokens', 'learned_until', 'allowance_ms', 'allowance_at',
    'lifetime_ms', 'lifetime_at' }
local CONFIG_FIELDS = 8

-- The arrival guard (README "What a bucket is charged"). A request's delay
-- from its admission (Redis TIME) to its arrival at the API has two parts:
--   - admission -> the request going out (the dispatch reply's trip, the
--     worker's loop, connecting): bounded. Each grant has a lifetime; the
--     worker sends it only while its age, counted from before it sent the
--     dispatch call, is within it, and hands it back untried otherwise
--     (worker/http: curl's pre-request callback);
--   - going out -> counted by the API (network, the API's own queue): an
--     allowance.
-- guard = lifetime + allowance, per account+model. Both are learned, each
-- within its bounds (fractions of the period, so one rule fits 2 s windows
-- and OpenAI's 60 s ones), and lose GUARD_DECAY of their excess over their
-- floor per period that passes without a reason to grow:
--   lifetime  grows when a grant went stale (limiter_lifetime_stale: this
--             host does not send within it; a lifetime it can never meet
--             would hand every grant back);
--   allowance grows when the API answers a limit 429 the ledger did not
--             predict (limiter_guard_429).
-- Each is stored in the model's bucket as what it grew to and when
-- (lifetime_ms/lifetime_at, allowance_ms/allowance_at); never grown, its
-- floor. The tenant and user buckets of a model use its guard. The policy's
-- window_guard_ms pins the guard of every bucket instead (the lifetime is
-- still learned: it bounds what the worker sends).
local GUARD_DECAY = 0.75

-- Floor and ceiling (ms) of part 'lifetime' or 'allowance' of the guard of
-- a window of period ms: 2 s -> 50..250 and 50..500; 60 s -> 500..2500 and
-- 500..5000.
local function guard_part_bounds(part, period)
    local lo = math.min(math.max(math.floor(period / 40), 50), 500)
    if part == 'lifetime' then
        return lo, math.max(lo, math.min(math.floor(period / 8), 2500))
    end
    return lo, math.max(lo, math.min(math.floor(period / 4), 5000))
end

-- Part of the guard in force at now for a window of period whose learned
-- state is (grown to, at) (nil: never grown): what it grew to, less
-- GUARD_DECAY of its excess over the floor per whole period since, within
-- its bounds.
local function guard_part(part, period, grown, at, now)
    local lo, hi = guard_part_bounds(part, period)
    local g = grown or lo
    if at ~= nil and now > at then
        g = lo + math.floor((g - lo) * GUARD_DECAY ^ math.floor((now - at) / period))
    end
    return math.min(math.max(g, lo), hi)
end

local HEADROOM_FIELDS = { high = 'headroom_high', normal = 'headroom_normal', low = 'headroom_low' }
local HEADROOM_DEFAULTS = { high = 100, normal = 100, low = 80 }

-- A new session at now for priority prio: policy read once.
local function limiter_session(P, prio, now)
    if HEADROOM_FIELDS[prio] == nil then
        prio = 'normal'
    end
    local v = redis.call('HMGET', P .. 'policy', HEADROOM_FIELDS[prio], 'soft_threshold',
        'window_guard_ms', 'users_by_tenant_ms')
    local users_since = tonumber(v[4])
    if users_since == nil then
        -- the first call of a version with a bucket per tenant's user
        -- (limiter_inherit_shared): once per account
        users_since = now
        redis.call('HSET', P .. 'policy', 'users_by_tenant_ms', llmq_int_text(now))
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
        v = redis.call('HMGET', s.P .. 'limit:' .. name, unpack(BUCKET_FIELDS, 1, CONFIG_FIELDS))
        s.defaults[name] = v
    end
    return v
end

local function window_member_tokens(m)
    local i = string.find(m, ':', 1, true)
    return tonumber(string.sub(m, i + 1))
end

-- Older versions kept one bucket "<model>/u/<user>" for that user of every
-- tenant (README "Upgrading"). A tenant's user bucket b that has no state
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
        local v = redis.call('HMGET', s.P .. 'limit:' .. shared, 'rtat', 'ttat')
        b.rtat = math.max(b.rtat, tonumber(v[1]) or 0)
        b.ttat = math.max(b.ttat, tonumber(v[2]) or 0)
        b.dirty = true
        return
    end
    local old = redis.call('ZRANGEBYSCORE', s.P .. 'bw:' .. shared, '(' .. (s.now - c.hold),
        '(' .. s.users_since, 'WITHSCORES')
    for i = 1, #old, 2 do
        local at = tonumber(old[i + 1])
        b.adds[#b.adds + 1] = old[i + 1]
        b.adds[#b.adds + 1] = old[i]
        b.n = b.n + 1
        b.tok = b.tok + window_member_tokens(old[i])
        if b.oldest == nil or at < b.oldest then
            b.oldest = at
        end
        b.dirty = true
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
    local key = s.P .. 'limit:' .. name
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
    if cfg ~= nil and cfg.mode ~= 'gcra' then
        local slash = string.find(name, '/', 1, true)
        local m = slash ~= nil and limiter_bucket(s, string.sub(name, 1, slash - 1)).cfg
        if m and m.mode ~= 'gcra' then -- a tenant's or user's: its model's
            cfg.lifetime, cfg.allowance = m.lifetime, m.allowance
        elseif slash == nil then
            cfg.lifetime = guard_part('lifetime', cfg.period, tonumber(v[21]), lifetime_at, s.now)
            cfg.allowance = guard_part('allowance', cfg.period, tonumber(v[19]), allowance_at,
                s.now)
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
    b = { name = name, level = level, key = key, wkey = s.P .. 'bw:' .. name, cfg = cfg,
        owns_config = owns_config, tok = tonumber(v[9]) or 0, n = tonumber(v[10]) or 0,
        oldest = tonumber(v[11]), pause = pause, pause_loaded = pause,
        exp = tonumber(v[15]) or 0, allowance_at = allowance_at, lifetime_at = lifetime_at,
        rtat = rtat > now and rtat or now,
        ttat = ttat > now and ttat or now, adds = {}, live = cfg ~= nil or pause > now,
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
-- (an endpoint's "<model>@<endpoint>", lua/lib/47_endpoints.lua; tenant and
-- user buckets stay the model's). path.tags is "|<m><bucket>..." for the
-- buckets that record admissions (m = 'w' window, 'g' gcra; upper case for
-- the usage ledger): the tail of a reservation handle.
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
            local usage = c.settle == 'usage'
            local m
            if c.mode == 'gcra' then
                m = usage and 'G' or 'g'
            else
                m = usage and 'W' or 'w'
            end
            tags = tags .. '|' .. m .. b.name
            b.soft = c.soft and b.level ~= 'model'
            path.has_soft = path.has_soft or b.soft
        end
    end
    path.tags = tags
    s.paths[pkey] = path
    return path
end

-- Writes b's pending admissions to its ZSET (they must be there before a
-- wait is computed from the log).
local function limiter_write_log(b)
    if #b.adds > 0 then
        redis.call('ZADD', b.wkey, unpack(b.adds))
        b.adds = {}
    end
end

-- Drops b's window entries that no longer count at now; refreshes the cache.
local function window_evict(b, now)
    limiter_write_log(b)
    local cutoff = now - b.cfg.hold
    local old = redis.call('ZRANGEBYSCORE', b.wkey, '-inf', cutoff)
    if #old > 0 then
        for i = 1, #old do
            b.tok = b.tok - window_member_tokens(old[i])
        end
        b.n = b.n - #old
        redis.call('ZREMRANGEBYSCORE', b.wkey, '-inf', cutoff)
    end
    local first = redis.call('ZRANGE', b.wkey, 0, 0, 'WITHSCORES')
    if #first == 0 or b.n <= 0 then
        -- The log is the truth (it may have expired whole); the cache follows.
        b.n, b.tok, b.oldest = 0, 0, nil
    else
        b.oldest = tonumber(first[2])
    end
    b.dirty = true
end

-- True when b's entries have aged out at now (so the cache overcounts).
local function window_stale(b, now)
    return b.cfg.mode ~= 'gcra' and b.oldest ~= nil and b.oldest <= now - b.cfg.hold
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
        if c.requests then
            local T = c.period / c.requests
            if b.rtat + T - now > math.max(c.burst_requests * T * frac, T) then
                return false
            end
        end
        if c.tokens and cost > 0 then
            local T = c.period / c.tokens
            if b.ttat + cost * T - now > math.max(c.burst_tokens * T * frac, cost * T) then
                return false
            end
        end
        return true
    end
    if c.requests and b.n > 0 and b.n + 1 > math.floor(c.requests * frac) then
        return false
    end
    if c.tokens and b.tok > 0 and b.tok + cost > math.floor(c.tokens * frac) then
        return false
    end
    return true
end

-- Fraction of b's limit in use (max over its dimensions), for soft limits.
local function limiter_use(b, now)
    local c = b.cfg
    if c == nil then
        return 0
    end
    local use = 0
    if c.mode == 'gcra' then
        if c.requests and c.requests > 0 then
            use = math.max(use, (b.rtat - now) / (c.burst_requests * c.period / c.requests))
        end
        if c.tokens and c.tokens > 0 then
            use = math.max(use, (b.ttat - now) / (c.burst_tokens * c.period / c.tokens))
        end
        return use
    end
    if c.requests and c.requests > 0 then
        use = math.max(use, b.n / c.requests)
    end
    if c.tokens and c.tokens > 0 then
        use = math.max(use, b.tok / c.tokens)
    end
    return use
end

-- Ms until the oldest window entries free `need` requests (by_tokens false)
-- or tokens: the admission time of the entry that completes it + hold - now.
local function window_free_wait(b, need, by_tokens, now)
    if not by_tokens then
        local e = redis.call('ZRANGE', b.wkey, need - 1, need - 1, 'WITHSCORES')
        return tonumber(e[2]) + b.cfg.hold - now
    end
    local freed, start = 0, 0
    while true do
        local e = redis.call('ZRANGE', b.wkey, start, start + 127, 'WITHSCORES')
        if #e == 0 then
            return b.cfg.hold -- unreachable while the cache matches the log
        end
        for i = 1, #e, 2 do
            freed = freed + window_member_tokens(e[i])
            if freed >= need then
                return tonumber(e[i + 1]) + b.cfg.hold - now
            end
        end
        start = start + 128
    end
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
        if c.requests then
            local T = c.period / c.requests
            local w = math.ceil(b.rtat + T - now - math.max(c.burst_requests * T * frac, T))
            if w > wait then wait, dim = w, 'requests' end
        end
        if c.tokens and cost > 0 then
            local T = c.period / c.tokens
            local w = math.ceil(b.ttat + cost * T - now - math.max(c.burst_tokens * T * frac, cost * T))
            if w > wait then wait, dim = w, 'tokens' end
        end
        return wait, dim
    end
    limiter_write_log(b)
    if c.requests then
        local need = math.min(b.n + 1 - math.floor(c.requests * frac), b.n)
        if need > 0 then
            local w = window_free_wait(b, need, false, now)
            if w > wait then wait, dim = w, 'requests' end
        end
    end
    if c.tokens then
        local need = math.min(b.tok + cost - math.floor(c.tokens * frac), b.tok)
        if need > 0 then
            local w = window_free_wait(b, need, true, now)
            if w > wait then wait, dim = w, 'tokens' end
        end
    end
    return wait, dim
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
    s.ids_last = redis.call('INCRBY', s.P .. 'seq', k)
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
        if c.requests then b.rtat = b.rtat + c.period / c.requests end
        if c.tokens then b.ttat = b.ttat + cost * c.period / c.tokens end
        return
    end
    b.adds[#b.adds + 1] = now_text
    b.adds[#b.adds + 1] = member
    b.n = b.n + 1
    b.tok = b.tok + cost
    if b.oldest == nil then
        b.oldest = now
    end
end

-- Decides one request of cost on path (from limiter_path) in session s.
-- Returns 'granted', id | 'denied', wait_ms, bucket, reason, level |
-- 'never', bucket, reason, limit. The reservation handle of a grant is
-- "<id>|<cost>|<now>" .. path.tags (limiter_handle). Soft buckets bind only
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
                (not limiter_fits(b, cost, s.frac, now) or b.oldest <= now - b.cfg.hold * 1.25) then
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
    return llmq_int_text(id) .. '|' .. cost_str .. '|' .. now_text .. path.tags
end

-- Pauses bucket name until now + ms (a later pause wins over an earlier one).
-- Returns the pause's end.
local function limiter_pause(P, name, ms, now)
    local key = P .. 'limit:' .. name
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
            limiter_write_log(b)
            local until_ms = now + b.cfg.hold
            if b.cfg.mode == 'gcra' then
                until_ms = math.max(b.rtat, b.ttat)
                redis.call('HSET', b.key, 'rtat', b.rtat, 'ttat', b.ttat)
            else
                redis.call('HSET', b.key, 'n', b.n, 'tok', b.tok, 'oldest', b.oldest or 0)
            end
            until_ms = math.max(until_ms, b.pause)
            if b.exp < until_ms then
                -- Refresh TTLs rarely: give them a period of slack.
                local exp = math.ceil(until_ms + b.cfg.period)
                redis.call('HSET', b.key, 'exp', exp)
                redis.call('PEXPIREAT', b.wkey, exp)
                if not b.owns_config then
                    redis.call('PEXPIREAT', b.key, exp)
                end
            end
        end
    end
end

-- Settles the reservation of handle: actual tokens (integer >= 0) raise the
-- charge of an admission-ledger bucket to actual when it exceeds the
-- reserved cost, and replace it (up or down) in a usage-ledger bucket;
-- actual = nil refunds it (its request and its tokens) in every bucket.
-- Window entries that already aged out are left alone: they no longer count.
-- Returns the number of buckets whose reservation was still counted, and the
-- names of those whose charge went down (room given back: the scheduler
-- wakes what waits on them, sched_wake_buckets). quiet: the caller does not
-- need that count, so a bucket whose charge stays as it is is not looked up
-- at all (the common settle: usage within the reservation).
local LIMITER_NONE_FREED = {} -- limiter_adjust's freed list when nothing was (never written)
local function limiter_adjust(P, handle, actual, quiet)
    -- handle: "<resid>|<cost>|<admitted ms>" then "|<mode><bucket>" per bucket
    if quiet and actual ~= nil and not string.find(handle, '|[WG]') then
        -- Only admission-ledger buckets: a usage within the charge changes
        -- none of them (the common settle), so nothing is parsed or looked up.
        local c = tonumber(string.match(handle, '^[^|]+|(%d+)|[^|]*|.'))
        if c ~= nil and actual <= c then
            return 0, LIMITER_NONE_FREED
        end
    end
    local resid, cost_s, tail = string.match(handle, '^([^|]+)|([^|]+)|[^|]*(|.+)$')
    local cost = tonumber(cost_s)
    if resid == nil or cost == nil then
        error('LLMQ_EINVAL bad reservation handle')
    end
    local adjusted, freed = 0, {}
    for tag in string.gmatch(tail, '|([^|]*)') do
        local mode, name = string.sub(tag, 1, 1), string.sub(tag, 2)
        local key = P .. 'limit:' .. name
        local to = actual
        if to ~= nil and (mode == 'w' or mode == 'g') and to < cost then
            to = cost -- the admission ledger never lowers a charge
        end
        if quiet and to == cost then
            -- nothing to change in this bucket
        elseif mode == 'w' or mode == 'W' then
            local wkey = P .. 'bw:' .. name
            local member = resid .. ':' .. cost
            local score = redis.call('ZSCORE', wkey, member)
            if score then
                if to == nil then
                    redis.call('ZREM', wkey, member)
                    redis.call('HINCRBY', key, 'tok', -cost)
                    redis.call('HINCRBY', key, 'n', -1)
                elseif to ~= cost then
                    redis.call('ZREM', wkey, member)
                    redis.call('ZADD', wkey, score, resid .. ':' .. to)
                    redis.call('HINCRBY', key, 'tok', to - cost)
                end
                adjusted = adjusted + 1
                if to == nil or to < cost then
                    freed[#freed + 1] = name
                end
            end
        else
            local s = { P = P, now = 0, buckets = {} }
            local b = limiter_bucket(s, name)
            if b.cfg ~= nil and redis.call('EXISTS', key) == 1 then
                if b.cfg.tokens and to ~= cost then
                    local delta = ((to or 0) - cost) * b.cfg.period / b.cfg.tokens
                    redis.call('HINCRBYFLOAT', key, 'ttat', delta)
                end
                if to == nil and b.cfg.requests then
                    redis.call('HINCRBYFLOAT', key, 'rtat', -b.cfg.period / b.cfg.requests)
                end
                adjusted = adjusted + 1
                if to == nil or to < cost then
                    freed[#freed + 1] = name
                end
            end
        end
    end
    return adjusted, freed
end

-- Teaches bucket b (loaded in session s) what OpenAI reported: when it says
-- fewer tokens remain than the bucket believes (another client on the key,
-- lower limits than configured), the difference is recorded as one phantom
-- admission that stops counting when OpenAI's window resets; nothing left of
-- a dimension pauses the bucket until its reset; a lower limit than the
-- configured one is learned too. Values < 0 are "not sent".
local function limiter_learn(s, b, rem_req, rem_tok, reset_req_ms, reset_tok_ms, lim_req, lim_tok)
    local c, now = b.cfg, s.now
    if rem_req == 0 and reset_req_ms > 0 then
        limiter_bucket_pause(s, b, reset_req_ms)
    end
    if rem_tok == 0 and reset_tok_ms > 0 then
        limiter_bucket_pause(s, b, reset_tok_ms)
    end
    if c == nil then
        return
    end
    -- A limit the API reports below the configured one (the configuration is
    -- wrong, or the account's tier changed) binds for ten periods, renewed by
    -- every response that says so.
    local learned = {}
    if lim_req > 0 and c.requests and lim_req < c.requests then
        learned[#learned + 1], learned[#learned + 2] = 'learned_requests', lim_req
        c.requests, c.burst_requests = lim_req, math.min(c.burst_requests, lim_req)
    end
    if lim_tok > 0 and c.tokens and lim_tok < c.tokens then
        learned[#learned + 1], learned[#learned + 2] = 'learned_tokens', lim_tok
        c.tokens, c.burst_tokens = lim_tok, math.min(c.burst_tokens, lim_tok)
    end
    if #learned > 0 then
        learned[#learned + 1], learned[#learned + 2] = 'learned_until', now + 10 * c.period
        redis.call('HSET', b.key, unpack(learned))
    end
    if c.tokens == nil or rem_tok < 0 then
        return
    end
    if c.mode == 'gcra' then
        local T = c.period / c.tokens
        local believed = c.burst_tokens - (b.ttat - now) / T
        if rem_tok < believed then
            b.ttat = now + (c.burst_tokens - rem_tok) * T
            b.dirty = true
        end
        return
    end
    if window_stale(b, now) then
        window_evict(b, now)
    end
    local believed = c.tokens - b.tok
    local missing = math.floor(believed - rem_tok)
    -- Ignore differences within 1% of the limit: OpenAI's own accounting of
    -- requests in flight makes small ones noise.
    if missing > c.tokens / 100 and reset_tok_ms > 0 then
        -- It counts until OpenAI's reset: admitted one hold before that.
        local at = math.min(now, now + math.min(reset_tok_ms, c.period) - c.hold)
        local id = limiter_new_id(s)
        redis.call('ZADD', b.wkey, at, 'x' .. id .. ':' .. missing)
        b.n = b.n + 1
        b.tok = b.tok + missing
        if b.oldest == nil or at < b.oldest then
            b.oldest = at
        end
        b.dirty = true
    end
end

-- The requests and tokens of b's window entries admitted at or before at_ms
-- that still count at now, phantoms of other clients included: what the
-- ledger knows may have reached the API ahead of a grant admitted at at_ms
-- (the grants of one dispatch call share its ms and reach the API in any
-- order).
local function window_ahead(b, at_ms, now)
    limiter_write_log(b)
    local e = redis.call('ZRANGEBYSCORE', b.wkey, '(' .. llmq_int_text(now - b.cfg.hold),
        llmq_int_text(at_ms))
    local tok = 0
    for i = 1, #e do
        tok = tok + window_member_tokens(e[i])
    end
    return #e, tok
end

-- Grows the allowance of model bucket b's arrival guard (session s, after
-- the refund of the request) when the API answered a limit 429 the ledger
-- did not predict to a grant of cost admitted at admitted_ms. h: the 429's
-- hint_ms (the API's wait until it fits) and its x-ratelimit values rem_req,
-- rem_tok, lim_req, lim_tok (-1: not sent). A late arrival is a request the
-- ledger let go (its admission aged out) while the API still counted it; it
-- leaves the API's window within the lateness. So the guard stays when:
--   - it is pinned, or b is no window bucket;
--   - the grant is older than the allowance's last growth (it was held by
--     the smaller guard: one late arrival grows it once);
--   - the API says its window has room for the request (no limit at its edge);
--   - the ledger has no room for it now (it predicts the 429: header
--     learning, a learned limit);
--   - another client's usage explains it: the API's wait is longer than the
--     allowance's ceiling (what blocks its window came after anything the
--     ledger let go), or it counted ahead of the request (limit - remaining)
--     more than half its limit beyond what the ledger holds from then or
--     before (a late arrival's leftovers are the entries of one lateness).
-- Else the allowance grows by the API's wait (the least it fell short by),
-- at least its floor and at most doubling, up to its ceiling. Returns the
-- new guard, or nil.
local function limiter_guard_429(s, b, admitted_ms, cost, h)
    local c, now = b.cfg, s.now
    if s.pinned_guard ~= nil or c == nil or c.mode == 'gcra' or
        admitted_ms < (b.allowance_at or 0) then
        return nil
    end
    local room_req = c.requests == nil or h.rem_req < 0 or h.rem_req >= 1
    local room_tok = c.tokens == nil or h.rem_tok < 0 or h.rem_tok >= cost
    if room_req and room_tok and (h.rem_req >= 0 or h.rem_tok >= 0) then
        return nil
    end
    if window_stale(b, now) then
        window_evict(b, now)
    end
    local lo, hi = guard_part_bounds('allowance', c.period)
    if not limiter_fits(b, cost, 1, now) or h.hint_ms > hi then
        return nil
    end
    local n_ahead, tok_ahead = window_ahead(b, admitted_ms, now)
    local lim_req = h.lim_req > 0 and h.lim_req or c.requests
    local lim_tok = h.lim_tok > 0 and h.lim_tok or c.tokens
    if (h.rem_req >= 0 and lim_req and lim_req - h.rem_req - n_ahead > 1 + lim_req / 2) or
        (h.rem_tok >= 0 and lim_tok and lim_tok - h.rem_tok - tok_ahead > cost + lim_tok / 2) then
        return nil
    end
    local a = math.min(c.allowance + math.min(math.max(h.hint_ms, lo), c.allowance), hi)
    redis.call('HSET', b.key, 'allowance_ms', a, 'allowance_at', now)
    b.allowance_at = now
    c.allowance, c.guard = a, c.lifetime + a
    c.hold = c.period + c.guard
    return c.guard
end

-- Grows the grant lifetime of model bucket b (session s) by half when a
-- worker handed back a grant admitted at admitted_ms unsent because it went
-- stale before its connection was ready: the host cannot send within it.
-- Once per lifetime (a stale grant older than the last growth was made for
-- the shorter one), up to the ceiling. Returns the new lifetime, or nil.
local function limiter_lifetime_stale(s, b, admitted_ms)
    local c = b.cfg
    if c == nil or c.mode == 'gcra' or admitted_ms < (b.lifetime_at or 0) then
        return nil
    end
    local _, hi = guard_part_bounds('lifetime', c.period)
    local l = math.min(c.lifetime + math.max(math.floor(c.lifetime / 2), 1), hi)
    redis.call('HSET', b.key, 'lifetime_ms', l, 'lifetime_at', s.now)
    b.lifetime_at = s.now
    c.lifetime = l
    c.guard = s.pinned_guard or l + c.allowance
    c.hold = c.period + c.guard
    return l
end

-- The floor and ceiling of the guard of window config c in session s (the
-- pinned value for both when the policy pins it).
local function limiter_guard_range(s, c)
    if s.pinned_guard ~= nil then
        return s.pinned_guard, s.pinned_guard
    end
    local llo, lhi = guard_part_bounds('lifetime', c.period)
    local alo, ahi = guard_part_bounds('allowance', c.period)
    return llo + alo, lhi + ahi
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
