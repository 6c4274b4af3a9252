-- The sliding window of the limiter (lua/lib/limiter.lua decides with it;
-- key layout in common/redis/keys.h): exact. Each admission is a member
-- "<resid>:<tokens>" of the ZSET P bw:<bucket>, scored by its admission time;
-- it counts for its hold: one period plus the arrival guard (while score >
-- now - hold; cfg.hold = period + cfg.guard, below): a request reaches the
-- API some ms after its admission, by a delay that varies, and the API's
-- window starts at arrival. The bucket hash caches n, tok (count and token
-- sum of the members) and oldest (earliest score). Entries that aged out are
-- dropped lazily: always before a decision they could change (the cached
-- sums overcount, so "fits by the cache" is exact), and otherwise once they
-- are a quarter period stale, which bounds memory.
-- b: a bucket of a limiter session (limiter_bucket), c its config b.cfg.
-- uses util: llmq_int_text

-- The arrival guard (docs/limiter.md "What a bucket is charged"). A request's delay
-- from its admission (Redis TIME) to its arrival at the API has two parts:
--   - admission -> the request going out (the dispatch reply's trip, the
--     worker's loop, connecting): bounded. Each grant has a lifetime; the
--     worker sends it only while its age, counted from before it sent the
--     dispatch call, is within it, and hands it back untried otherwise
--     (worker/http: curl's pre-request callback);
--   - going out -> counted by the API (the send on a loaded host, the
--     network, the API's own queue): an allowance.
-- guard = lifetime + allowance, per account+model and per endpoint of a
-- model (its bucket "<model>@<endpoint>"). Both are learned, each within
-- its bounds (fractions of the period, so one rule fits 2 s windows and
-- OpenAI's 60 s ones), and lose GUARD_DECAY of their excess over their floor
-- per period that passes without a reason to grow:
--   lifetime  grows when a grant went stale (limiter_lifetime_stale: this
--             host does not send within it; a lifetime it can never meet
--             would hand every grant back);
--   allowance grows when the API answers a limit 429 the ledger did not
--             predict (limiter_guard_429).
-- Each is stored in the model's bucket as what it grew to and when
-- (lifetime_ms/lifetime_at, allowance_ms/allowance_at); never grown, its
-- floor. The allowance is learned without 429s as well (guard_allowance):
-- a bucket starts at the allowance's ceiling (safe on a loaded host, the
-- first window included) and comes down from what the workers measure,
-- each call's lateness from its admission to its arrival, an upper bound
-- (limiter_late_sample: late_ms, late_prev_ms, late_at): the guard covers
-- the highest of them; or, where nothing is measured, by the
-- decay from its first use (guard_born_ms). The tenant and user buckets of
-- a model use its guard. The policy's window_guard_ms pins the guard of
-- every bucket instead (the lifetime is still learned: it bounds what the
-- worker sends).
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

-- The allowance in force at now of a model (or endpoint) bucket of a
-- window of period ms: the largest of
--   - what 429s grew it to (grown, at: guard_part's decay);
--   - the measured lateness: late, the highest lateness sample of the last
--     two sample periods (limiter_late_sample; kept however old, so a
--     restart starts from it), less the lifetime (the guard is lifetime +
--     allowance), plus half the floor (the part of the way no worker sees:
--     the API counting a request it has read);
--   - never measured (late nil): the safe start, the ceiling as of the
--     bucket's first use born (nil: now), decaying from there;
-- within the allowance's floor and ceiling.
local function guard_allowance(period, lifetime, grown, at, late, born, now)
    local lo, hi = guard_part_bounds('allowance', period)
    local a = guard_part('allowance', period, grown, at, now)
    local seen
    if late ~= nil then
        seen = math.max(late - lifetime, 0) + math.floor(lo / 2)
    else
        seen = guard_part('allowance', period, hi, born or now, now)
    end
    return math.min(math.max(a, seen, lo), hi)
end

local function window_member_tokens(m)
    local i = string.find(m, ':', 1, true)
    return tonumber(string.sub(m, i + 1))
end

-- Writes b's pending admissions to its ZSET (they must be there before a
-- wait is computed from the log).
local function window_write_log(b)
    if #b.adds > 0 then
        redis.call('ZADD', b.wkey, unpack(b.adds))
        b.adds = {}
    end
end

-- Drops b's window entries that no longer count at now; refreshes the cache.
local function window_evict(b, now)
    window_write_log(b)
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

-- Whether cost fits window bucket b (config c) at headroom frac by the
-- cached counters (limiter_fits).
local function window_fits(b, c, cost, frac)
    if c.requests and b.n > 0 and b.n + 1 > math.floor(c.requests * frac) then
        return false
    end
    if c.tokens and b.tok > 0 and b.tok + cost > math.floor(c.tokens * frac) then
        return false
    end
    return true
end

-- Fraction of window bucket b's limit (config c) in use, max over its
-- dimensions (limiter_use).
local function window_use(b, c)
    local use = 0
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

-- Ms until cost fits window bucket b (config c; the log must be evicted) and
-- the binding dimension, or wait and dim when those are longer
-- (limiter_wait).
local function window_wait(b, c, cost, frac, now, wait, dim)
    window_write_log(b)
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

-- Counts one more entry of tokens admitted at `at` (ms) in window bucket b's
-- cached counters (limiter_flush writes them): every way an entry joins a
-- window (an admission, the copy of a user's shared entries, a learnt
-- entry) counts it here.
local function window_count(b, tokens, at)
    b.n = b.n + 1
    b.tok = b.tok + tokens
    if b.oldest == nil or at < b.oldest then
        b.oldest = at
    end
    b.dirty = true
end

-- Records an entry "<id>:<cost>" (member) of cost tokens in window bucket b
-- at `at` (at_text: its decimal text, the log's score), in memory
-- (limiter_record; limiter_flush writes it and its log).
local function window_record(b, member, cost, at, at_text)
    b.adds[#b.adds + 1] = at_text
    b.adds[#b.adds + 1] = member
    window_count(b, cost, at)
end

-- Writes window bucket b's cached counters (limiter_flush; its log first).
-- Returns until when its keys must live: one hold from now.
local function window_write(b, now)
    redis.call('HSET', b.key, 'n', b.n, 'tok', b.tok, 'oldest', b.oldest or 0)
    if b.born_new then
        -- the first use of a model's bucket: its guard's safe start decays
        -- from now (guard_allowance)
        redis.call('HSET', b.key, 'guard_born_ms', now)
        b.born_new = false
    end
    return now + b.cfg.hold
end

-- Settles admission "<resid>:<cost>" of window bucket name (hash key, log
-- wkey) to charge `to` tokens (nil: refunds it, its request and its tokens;
-- limiter_adjust). An entry that already aged out is left alone: it no
-- longer counts. Returns true when it still counted.
local function window_settle(key, wkey, resid, cost, to)
    local member = resid .. ':' .. cost
    local score = redis.call('ZSCORE', wkey, member)
    if not score then
        return false
    end
    if to == nil then
        redis.call('ZREM', wkey, member)
        redis.call('HINCRBY', key, 'tok', -cost)
        redis.call('HINCRBY', key, 'n', -1)
    elseif to ~= cost then
        redis.call('ZREM', wkey, member)
        redis.call('ZADD', wkey, score, resid .. ':' .. to)
        redis.call('HINCRBY', key, 'tok', to - cost)
    end
    return true
end

-- The requests and tokens of b's window entries admitted at or before at_ms
-- that still count at now, phantoms of other clients included: what the
-- ledger knows may have reached the API ahead of a grant admitted at at_ms
-- (the grants of one dispatch call share its ms and reach the API in any
-- order).
local function window_ahead(b, at_ms, now)
    window_write_log(b)
    local e = redis.call('ZRANGEBYSCORE', b.wkey, '(' .. llmq_int_text(now - b.cfg.hold),
        llmq_int_text(at_ms))
    local tok = 0
    for i = 1, #e do
        tok = tok + window_member_tokens(e[i])
    end
    return #e, tok
end

-- The floor and ceiling of the guard of window config c in session s (the
-- pinned value for both when the policy pins it).
local function window_guard_range(s, c)
    if s.pinned_guard ~= nil then
        return s.pinned_guard, s.pinned_guard
    end
    local llo, lhi = guard_part_bounds('lifetime', c.period)
    local alo, ahi = guard_part_bounds('allowance', c.period)
    return llo + alo, lhi + ahi
end
