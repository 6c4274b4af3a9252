-- What the limiter learns from the API (lua/lib/limiter.lua holds the
-- buckets): OpenAI's x-ratelimit headers of every response (limiter_learn:
-- the room another client took, a lower limit, a dimension used up) and the
-- arrival guard's growth (lua/lib/limiter_window.lua states the guard): a
-- limit 429 the ledger did not predict grows its allowance
-- (limiter_guard_429), a grant that went stale unsent grows its lifetime
-- (limiter_lifetime_stale), and each call's measured lateness brings it
-- to what the host needs, down without a 429 or up before one
-- (limiter_late_sample). Called by job_settle.
-- uses keys: KEY
-- uses limiter: limiter_bucket_pause, limiter_new_id, limiter_fits
-- uses limiter_window: guard_part_bounds, window_stale, window_evict, window_ahead, window_count

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
        window_count(b, missing, at)
    end
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

-- Records a worker's lateness sample late (ms, >= 0: how late a call of
-- bucket name may have reached the API after its admission, the settle's
-- late_ms) at now, in P limit:<name> of a model or endpoint with a
-- window of its own (others are left alone). The bucket keeps the highest
-- sample of the current sample period (late_ms, from late_at on) and of the
-- one before (late_prev_ms); a sample one period or more after late_at
-- starts a new one, the current becoming the previous. Their maximum is
-- the measured part of the allowance (guard_allowance): a higher sample
-- widens the guard at once, and a host that got quieter brings it down
-- within two periods of samples. Writes only when something changed.
local function limiter_late_sample(P, name, late, now)
    local key = KEY.limit(P, name)
    local v = redis.call('HMGET', key, 'period_ms', 'mode', 'late_ms', 'late_at')
    local period = tonumber(v[1])
    if period == nil or v[2] == 'gcra' then
        return
    end
    local cur, at = tonumber(v[3]), tonumber(v[4])
    if at == nil or now - at >= period then
        redis.call('HSET', key, 'late_prev_ms', cur or late, 'late_ms', late, 'late_at', now)
    elseif cur == nil or late > cur then
        redis.call('HSET', key, 'late_ms', late)
    end
end
