-- The sliding window of the limiter (lua/lib/limiter.lua decides with it;
-- key layout in common/redis/keys.h): exact. Each admission is a member
-- "<resid>:<tokens>" of the ZSET P bw:<bucket>, scored by its admission time;
-- it counts for its hold: one period plus the arrival guard (while score >
-- now - hold; cfg.hold = period + cfg.guard, below): a request reaches the
-- API some ms after its admission, by a delay that varies, and the API's
-- window starts at arrival. Once its call is settled with its lateness
-- measured (job_settle's late_ms: admission to arrival, an upper bound),
-- its arrival is known: the entry moves to the ZSET P bws:<bucket> scored by
-- that latest arrival, admission + lateness + the part no worker sees
-- (window_arrive), and counts for one period from it (while score > now -
-- period), whatever the guard is or becomes: the API's window of the call,
-- [arrival, arrival + period], stays covered, and the guard's excess over
-- this call's lateness is no longer held. The guard covers only the calls
-- whose arrival is not known yet. Each entry frees its room at its end:
-- admission + hold in bw:, arrival + period in bws:.
-- The bucket hash caches n, tok (count and token sum of the members of
-- both), oldest and oldest_arrived (the earliest score of each; a lower
-- bound: a settle may take the earliest away). Entries that ended are
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
-- The part of a call's lateness no worker sees (the API counting a request
-- it has read), for a window of period ms: half the allowance's floor.
local function guard_unseen(period)
    local lo = guard_part_bounds('allowance', period)
    return math.floor(lo / 2)
end

local function guard_allowance(period, lifetime, grown, at, late, born, now)
    local lo, hi = guard_part_bounds('allowance', period)
    local a = guard_part('allowance', period, grown, at, now)
    local seen
    if late ~= nil then
        seen = math.max(late - lifetime, 0) + guard_unseen(period)
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

-- Drops the entries of log key scored at or before cutoff from b's cached
-- counters and the log; returns the earliest score left, or nil.
local function window_evict_log(b, key, cutoff)
    local old = redis.call('ZRANGEBYSCORE', key, '-inf', cutoff)
    if #old > 0 then
        for i = 1, #old do
            b.tok = b.tok - window_member_tokens(old[i])
        end
        b.n = b.n - #old
        redis.call('ZREMRANGEBYSCORE', key, '-inf', cutoff)
    end
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return tonumber(first[2])
end

-- Drops b's window entries that no longer count at now; refreshes the cache.
local function window_evict(b, now)
    window_write_log(b)
    b.oldest = window_evict_log(b, b.wkey, now - b.cfg.hold)
    b.oldest_arrived = window_evict_log(b, b.akey, now - b.cfg.period)
    if (b.oldest == nil and b.oldest_arrived == nil) or b.n <= 0 then
        -- The logs are the truth (they may have expired whole); the cache follows.
        b.n, b.tok, b.oldest, b.oldest_arrived = 0, 0, nil, nil
    end
    b.dirty = true
end

-- True when b's entries have ended at now (so the cache overcounts); with
-- slack (> 1), ended that many times their hold ago.
local function window_stale(b, now, slack)
    local c = b.cfg
    if c.mode == 'gcra' then
        return false
    end
    slack = slack or 1
    if b.oldest == nil and b.oldest_arrived == nil then
        return b.n > 0 -- counted, but no entry known: the logs decide
    end
    return (b.oldest ~= nil and b.oldest <= now - c.hold * slack) or
        (b.oldest_arrived ~= nil and b.oldest_arrived <= now - c.period * slack)
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

-- The next entry of log l (window_free_wait's reader) as its member and
-- end (ms), or nil when l has no more; reads 128 entries at a time.
local function window_log_next(l)
    if l.i > #l.e then
        if l.start < 0 then
            return nil
        end
        l.e, l.i = redis.call('ZRANGE', l.key, l.start, l.start + 127, 'WITHSCORES'), 1
        l.start = #l.e == 256 and l.start + 128 or -1
        if #l.e == 0 then
            return nil
        end
    end
    return l.e[l.i], tonumber(l.e[l.i + 1]) + l.hold
end

-- Ms until the window entries that end first free `need` requests
-- (by_tokens false) or tokens: the end of the entry that completes it - now.
-- The two logs are read merged by end (admission + hold; arrival + period).
local function window_free_wait(b, need, by_tokens, now)
    local logs = { { key = b.wkey, hold = b.cfg.hold, e = {}, i = 1, start = 0 },
        { key = b.akey, hold = b.cfg.period, e = {}, i = 1, start = 0 } }
    local freed = 0
    while true do
        local l, member, ends = nil, nil, nil
        for k = 1, 2 do
            local m, e = window_log_next(logs[k])
            if m ~= nil and (ends == nil or e < ends) then
                l, member, ends = logs[k], m, e
            end
        end
        if l == nil then
            return b.cfg.hold -- unreachable while the cache matches the logs
        end
        l.i = l.i + 2
        freed = freed + (by_tokens and window_member_tokens(member) or 1)
        if freed >= need then
            return ends - now
        end
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
    redis.call('HSET', b.key, 'n', b.n, 'tok', b.tok, 'oldest', b.oldest or 0,
        'oldest_arrived', b.oldest_arrived or 0)
    if b.born_new then
        -- the first use of a model's bucket: its guard's safe start decays
        -- from now (guard_allowance)
        redis.call('HSET', b.key, 'guard_born_ms', now)
        b.born_new = false
    end
    return now + b.cfg.hold
end

-- Moves member (its tokens now `to`) of window bucket key into its log of
-- arrivals akey at arrived (ms: its call's latest arrival at the API), to
-- count until arrived + period (window_settle). The earliest arrival
-- cached is kept a lower bound; the keys live until the entry ends.
local function window_arrive(key, akey, member, arrived, period)
    redis.call('ZADD', akey, arrived, member)
    local v = redis.call('HMGET', key, 'oldest_arrived', 'exp')
    local oldest = tonumber(v[1])
    if oldest == nil or oldest == 0 or arrived < oldest then
        redis.call('HSET', key, 'oldest_arrived', arrived)
    end
    local exp = tonumber(v[2]) or 0
    if exp < arrived + period then
        -- lateness beyond the hold the admission set the keys' life for
        exp = arrived + 2 * period
        redis.call('HSET', key, 'exp', exp)
        if redis.call('PTTL', key) >= 0 then
            redis.call('PEXPIREAT', key, exp)
        end
    end
    redis.call('PEXPIREAT', akey, exp)
end

-- Settles admission "<resid>:<cost>" of window bucket w (w.key its hash,
-- w.wkey and w.akey its logs, w.period and w.hold its period and hold) to
-- charge `to` tokens (nil: refunds it, its request and its tokens;
-- limiter_adjust). arrived: nil, or the latest arrival (ms) of its call at
-- the API, measured: the entry then counts one period from it
-- (window_arrive) instead of one hold from its admission. An entry that
-- already ended is left alone: it no longer counts. Returns true when it
-- still counted, and its new end (ms) when it now ends sooner than it did
-- (re-timed from its arrival: a wait computed from its old end is too
-- long), else nil.
local function window_settle(w, resid, cost, to, arrived)
    local member = resid .. ':' .. cost
    local log = w.wkey
    local score = redis.call('ZSCORE', log, member)
    if not score then
        log = w.akey -- settled before (a refund after the result)
        score = redis.call('ZSCORE', log, member)
        if not score then
            return false
        end
    end
    if to == nil then
        redis.call('ZREM', log, member)
        redis.call('HINCRBY', w.key, 'tok', -cost)
        redis.call('HINCRBY', w.key, 'n', -1)
        return true
    end
    local settled = resid .. ':' .. to
    local sooner = nil
    if arrived ~= nil and log == w.wkey then
        redis.call('ZREM', log, member)
        window_arrive(w.key, w.akey, settled, arrived, w.period)
        if arrived + w.period < tonumber(score) + w.hold then
            sooner = arrived + w.period
        end
    elseif to ~= cost then
        redis.call('ZREM', log, member)
        redis.call('ZADD', log, score, settled)
    end
    if to ~= cost then
        redis.call('HINCRBY', w.key, 'tok', to - cost)
    end
    return true, sooner
end

-- The requests and tokens of b's window entries admitted at or before at_ms
-- that still count at now, phantoms of other clients included: what the
-- ledger knows may have reached the API ahead of a grant admitted at at_ms
-- (the grants of one dispatch call share its ms and reach the API in any
-- order); of the settled ones, those that arrived by the latest arrival the
-- guard allows the grant (their admission is not kept).
local function window_ahead(b, at_ms, now)
    window_write_log(b)
    local e = redis.call('ZRANGEBYSCORE', b.wkey, '(' .. llmq_int_text(now - b.cfg.hold),
        llmq_int_text(at_ms))
    local a = redis.call('ZRANGEBYSCORE', b.akey, '(' .. llmq_int_text(now - b.cfg.period),
        llmq_int_text(at_ms + b.cfg.guard))
    local tok = 0
    for i = 1, #e do
        tok = tok + window_member_tokens(e[i])
    end
    for i = 1, #a do
        tok = tok + window_member_tokens(a[i])
    end
    return #e + #a, tok
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
