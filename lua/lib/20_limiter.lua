-- The limiter core shared by acquire, settle, refund, pause, usage and the
-- worker's dispatch. P is the account's key prefix "llmq:{ACCOUNT}:"; key
-- layout in common/keys.h. All times are ms from Redis TIME (llmq_now_ms).
--
-- A bucket limits requests and/or tokens over period_ms, in one of two modes:
--   window: exact sliding window. Each admission is a ZSET member
--           "<resid>:<tokens>" scored by its admission time; it counts for
--           exactly one period (while score > now - period). bs:<b>.tok holds
--           the token sum of the members, kept in step on every change.
--   gcra:   continuous refill (GCRA): per dimension a theoretical arrival time
--           (rtat, ttat); O(1) state; burst = capacity, default the limit.
-- A pause (bs:<b>.pause, ms) denies every acquire until it passes.

local LIMITER_PRIORITIES = { high = 'headroom_high', normal = 'headroom_normal', low = 'headroom_low' }
local LIMITER_HEADROOM_DEFAULTS = { headroom_high = 100, headroom_normal = 100, headroom_low = 80 }

-- The path of buckets for (model, tenant, user): account+model first.
local function limiter_path(model, tenant, user)
    local path = { { name = model, level = 'model' } }
    if tenant ~= nil and tenant ~= '' then
        path[#path + 1] = { name = model .. '/t/' .. tenant, default = model .. '/t/*', level = 'tenant' }
    end
    if user ~= nil and user ~= '' then
        path[#path + 1] = { name = model .. '/u/' .. user, default = model .. '/u/*', level = 'user' }
    end
    return path
end

-- Account policy: headroom fraction for priority prio, soft threshold (0..1).
local function limiter_policy(P, prio)
    local t = llmq_hash_table(redis.call('HGETALL', P .. 'policy'))
    local field = LIMITER_PRIORITIES[prio] or 'headroom_normal'
    local pct = tonumber(t[field]) or LIMITER_HEADROOM_DEFAULTS[field]
    return pct / 100, (tonumber(t.soft_threshold) or 80) / 100
end

-- The limit config of bucket b (falling back to b.default), or nil: no limit.
local function limiter_config(P, b)
    local h = redis.call('HGETALL', P .. 'limit:' .. b.name)
    if #h == 0 and b.default ~= nil then
        h = redis.call('HGETALL', P .. 'limit:' .. b.default)
    end
    if #h == 0 then
        return nil
    end
    local t = llmq_hash_table(h)
    local c = {
        requests = tonumber(t.requests),
        tokens = tonumber(t.tokens),
        period = tonumber(t.period_ms) or 60000,
        mode = t.mode or 'window',
        soft = t.soft == '1',
    }
    if c.requests == nil and c.tokens == nil then
        return nil
    end
    c.burst_requests = tonumber(t.burst_requests) or c.requests
    c.burst_tokens = tonumber(t.burst_tokens) or c.tokens
    return c
end

-- Token count encoded in a window member "<resid>:<tokens>".
local function window_member_tokens(m)
    local i = string.find(m, ':', 1, true)
    return tonumber(string.sub(m, i + 1))
end

-- Loads b's live state at now: drops window entries older than one period and
-- fills b.count, b.tok (window) or b.rtat, b.ttat (gcra), and b.pause.
local function limiter_load(P, b, now)
    local c = b.cfg
    b.skey = P .. 'bs:' .. b.name
    b.wkey = P .. 'bw:' .. b.name
    local st = redis.call('HMGET', b.skey, 'tok', 'pause', 'rtat', 'ttat')
    b.pause = tonumber(st[2]) or 0
    if c.mode == 'gcra' then
        b.rtat = math.max(tonumber(st[3]) or 0, now)
        b.ttat = math.max(tonumber(st[4]) or 0, now)
        return
    end
    local cutoff = now - c.period
    local old = redis.call('ZRANGEBYSCORE', b.wkey, '-inf', cutoff)
    local tok = tonumber(st[1]) or 0
    if #old > 0 then
        for i = 1, #old do
            tok = tok - window_member_tokens(old[i])
        end
        redis.call('ZREMRANGEBYSCORE', b.wkey, '-inf', cutoff)
    end
    b.count = redis.call('ZCARD', b.wkey)
    if b.count == 0 then
        tok = 0 -- the log is the truth; the sum only caches it
    end
    if b.count == 0 or #old > 0 then
        redis.call('HSET', b.skey, 'tok', tok)
    end
    b.tok = tok
end

-- Fraction of b's limit in use now (max over its dimensions), for soft limits.
local function limiter_use(b, now)
    local c = b.cfg
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
        use = math.max(use, b.count / c.requests)
    end
    if c.tokens and c.tokens > 0 then
        use = math.max(use, b.tok / c.tokens)
    end
    return use
end

-- Ms until the oldest window entries free `need` units (1 per request when
-- count_requests, else tokens): the admission time of the entry that completes
-- the freeing, plus one period, minus now.
local function window_free_wait(b, need, count_requests, now)
    if count_requests then
        local e = redis.call('ZRANGE', b.wkey, need - 1, need - 1, 'WITHSCORES')
        return tonumber(e[2]) + b.cfg.period - now
    end
    local freed, start = 0, 0
    while true do
        local e = redis.call('ZRANGE', b.wkey, start, start + 127, 'WITHSCORES')
        if #e == 0 then
            return b.cfg.period -- unreachable while tok matches the log
        end
        for i = 1, #e, 2 do
            freed = freed + window_member_tokens(e[i])
            if freed >= need then
                return tonumber(e[i + 1]) + b.cfg.period - now
            end
        end
        start = start + 128
    end
end

-- Never-fits check: returns dimension, limit when cost can never fit b.
local function limiter_never_fits(b, cost)
    local c = b.cfg
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

-- Ms until cost fits b at headroom fraction frac (0 = fits now), and which
-- dimension binds. Headroom: a priority may fill only frac of the limit, except
-- that an idle bucket admits any cost within the whole limit (else a large
-- low-priority job would wait forever).
local function limiter_wait(b, cost, frac, now)
    local c = b.cfg
    local wait, dim = 0, nil
    if b.pause > now then
        wait, dim = b.pause - now, 'pause'
    end
    if c.mode == 'gcra' then
        if c.requests then
            local T = c.period / c.requests
            local allow = math.max(c.burst_requests * T * frac, T)
            local w = math.ceil(b.rtat + T - now - allow)
            if w > wait then wait, dim = w, 'requests' end
        end
        if c.tokens and cost > 0 then
            local T = c.period / c.tokens
            local allow = math.max(c.burst_tokens * T * frac, cost * T)
            local w = math.ceil(b.ttat + cost * T - now - allow)
            if w > wait then wait, dim = w, 'tokens' end
        end
        return wait, dim
    end
    if c.requests then
        local lim = math.floor(c.requests * frac)
        local need = math.min(b.count + 1 - lim, b.count)
        if need > 0 then
            local w = window_free_wait(b, need, true, now)
            if w > wait then wait, dim = w, 'requests' end
        end
    end
    if c.tokens then
        local lim = math.floor(c.tokens * frac)
        local need = math.min(b.tok + cost - lim, b.tok)
        if need > 0 then
            local w = window_free_wait(b, need, false, now)
            if w > wait then wait, dim = w, 'tokens' end
        end
    end
    return wait, dim
end

-- Sets a state key's TTL so an idle bucket disappears once nothing in it
-- matters: after its last window entry ages out, its TAT passes, its pause ends.
local function limiter_expire(b, until_ms, now)
    local ttl = math.max(until_ms, b.pause) - now
    if ttl > 0 then
        redis.call('PEXPIRE', b.skey, math.ceil(ttl) + 1)
    end
end

-- Records an admission of cost with reservation id resid at now in b.
local function limiter_record(b, resid, cost, now)
    local c = b.cfg
    if c.mode == 'gcra' then
        local rtat, ttat = b.rtat, b.ttat
        if c.requests then rtat = rtat + c.period / c.requests end
        if c.tokens then ttat = ttat + cost * c.period / c.tokens end
        redis.call('HSET', b.skey, 'rtat', rtat, 'ttat', ttat)
        limiter_expire(b, math.max(rtat, ttat), now)
        return
    end
    redis.call('ZADD', b.wkey, now, resid .. ':' .. cost)
    redis.call('HINCRBY', b.skey, 'tok', cost)
    redis.call('PEXPIRE', b.wkey, c.period + 1)
    limiter_expire(b, now + c.period, now)
end

-- Decides whether cost fits every bucket of path (a list from limiter_path) at
-- now for priority prio. Returns a decision table:
--   {status = 'granted', buckets = {...}}                (nothing recorded yet)
--   {status = 'denied', wait = ms, bucket = name, reason = dim, level = level}
--   {status = 'never', bucket = name, reason = dim, limit = n}
-- Soft buckets bind only while the account+model bucket's use is at or above
-- the soft threshold; they are still recorded so their use is known when they
-- start to bind.
local function limiter_decide(P, path, cost, prio, now)
    local frac, soft_threshold = limiter_policy(P, prio)
    local live = {}
    for i = 1, #path do
        local b = path[i]
        b.cfg = limiter_config(P, b)
        if b.cfg ~= nil then
            local dim, limit = limiter_never_fits(b, cost)
            -- A soft bucket can borrow, so only hard buckets make a cost hopeless.
            if dim ~= nil and not (b.cfg.soft and b.level ~= 'model') then
                return { status = 'never', bucket = b.name, reason = dim, limit = limit }
            end
            limiter_load(P, b, now)
            live[#live + 1] = b
        end
    end
    local contended = true
    if path[1].cfg ~= nil then
        contended = limiter_use(path[1], now) >= soft_threshold
    end
    local worst = nil
    for i = 1, #live do
        local b = live[i]
        if not (b.cfg.soft and b.level ~= 'model' and not contended) then
            local w, dim = limiter_wait(b, cost, frac, now)
            if w > 0 and (worst == nil or w > worst.wait) then
                worst = { status = 'denied', wait = w, bucket = b.name, reason = dim, level = b.level }
            end
        end
    end
    if worst ~= nil then
        return worst
    end
    return { status = 'granted', buckets = live }
end

-- Records a granted decision; returns the reservation handle
-- "<resid>|<cost>|<now>|<m><bucket>|..." with m = 'w' (window) or 'g' (gcra).
local function limiter_commit(P, decision, cost, now)
    local resid = redis.call('INCR', P .. 'seq')
    local parts = { resid, cost, now }
    for i = 1, #decision.buckets do
        local b = decision.buckets[i]
        limiter_record(b, resid, cost, now)
        parts[#parts + 1] = (b.cfg.mode == 'gcra' and 'g' or 'w') .. b.name
    end
    return table.concat(parts, '|'), resid
end

-- Replaces the reserved cost of handle with actual tokens (refund: actual =
-- nil, which also gives back the request). Window entries that already aged
-- out are left alone: they no longer count. Returns buckets adjusted.
local function limiter_adjust(P, handle, actual)
    local f = llmq_split(handle, '|')
    local resid, cost = f[1], tonumber(f[2])
    if resid == nil or cost == nil or #f < 4 then
        error('LLMQ_EINVAL bad reservation handle')
    end
    local adjusted = 0
    for i = 4, #f do
        local mode, name = string.sub(f[i], 1, 1), string.sub(f[i], 2)
        local skey = P .. 'bs:' .. name
        if mode == 'w' then
            local wkey = P .. 'bw:' .. name
            local member = resid .. ':' .. cost
            local score = redis.call('ZSCORE', wkey, member)
            if score then
                redis.call('ZREM', wkey, member)
                if actual ~= nil then
                    redis.call('ZADD', wkey, score, resid .. ':' .. actual)
                    redis.call('HINCRBY', skey, 'tok', actual - cost)
                else
                    redis.call('HINCRBY', skey, 'tok', -cost)
                end
                adjusted = adjusted + 1
            end
        else
            local cfg = limiter_config(P, { name = name })
            if cfg ~= nil and redis.call('EXISTS', skey) == 1 then
                if cfg.tokens then
                    local delta = ((actual or 0) - cost) * cfg.period / cfg.tokens
                    redis.call('HINCRBYFLOAT', skey, 'ttat', delta)
                end
                if actual == nil and cfg.requests then
                    redis.call('HINCRBYFLOAT', skey, 'rtat', -cfg.period / cfg.requests)
                end
                adjusted = adjusted + 1
            end
        end
    end
    return adjusted
end

-- Pauses bucket name until now + ms (a later pause wins over an earlier one).
local function limiter_pause(P, name, ms, now)
    local skey = P .. 'bs:' .. name
    local untl = now + ms
    local cur = tonumber(redis.call('HGET', skey, 'pause')) or 0
    if untl > cur then
        redis.call('HSET', skey, 'pause', untl)
        local ttl = redis.call('PTTL', skey)
        if ttl < ms then
            redis.call('PEXPIRE', skey, ms + 1)
        end
    end
    return math.max(untl, cur)
end

-- Flat limits of the buckets of path for the caller's local fail-open cache:
-- {name, requests, tokens, period_ms, ...} with -1 for "no limit".
local function limiter_limits_flat(path)
    local out = {}
    for i = 1, #path do
        local c = path[i].cfg
        if c ~= nil then
            out[#out + 1] = path[i].name
            out[#out + 1] = c.requests or -1
            out[#out + 1] = c.tokens or -1
            out[#out + 1] = c.period
        end
    end
    return out
end
