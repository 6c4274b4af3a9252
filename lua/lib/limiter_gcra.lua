-- GCRA, the limiter's continuous refill (lua/lib/limiter.lua decides with
-- it; key layout in common/redis/keys.h): per dimension a theoretical
-- arrival time (rtat for requests, ttat for tokens, ms) that each admission
-- moves by its share of the period (period / limit per request, per token);
-- O(1) state; burst = capacity, default the limit. A cost fits while its
-- arrival time stays within burst (times the headroom) of now.
-- b: a bucket of a limiter session (limiter_bucket), c its config b.cfg.

-- Whether cost fits GCRA bucket b (config c) at headroom frac at now
-- (limiter_fits).
local function gcra_fits(b, c, cost, frac, now)
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

-- Fraction of GCRA bucket b's burst (config c) in use at now, max over its
-- dimensions (limiter_use).
local function gcra_use(b, c, now)
    local use = 0
    if c.requests and c.requests > 0 then
        use = math.max(use, (b.rtat - now) / (c.burst_requests * c.period / c.requests))
    end
    if c.tokens and c.tokens > 0 then
        use = math.max(use, (b.ttat - now) / (c.burst_tokens * c.period / c.tokens))
    end
    return use
end

-- Ms until cost fits GCRA bucket b (config c) at now and the binding
-- dimension, or wait and dim when those are longer (limiter_wait).
local function gcra_wait(b, c, cost, frac, now, wait, dim)
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

-- Records an admission of cost in GCRA bucket b (config c), in memory
-- (limiter_record; limiter_flush writes it).
local function gcra_record(b, c, cost)
    if c.requests then b.rtat = b.rtat + c.period / c.requests end
    if c.tokens then b.ttat = b.ttat + cost * c.period / c.tokens end
end

-- Writes GCRA bucket b's arrival times (limiter_flush). Returns until when
-- its keys must live: the later of them.
local function gcra_write(b)
    redis.call('HSET', b.key, 'rtat', b.rtat, 'ttat', b.ttat)
    return math.max(b.rtat, b.ttat)
end

-- Settles an admission of cost tokens in the GCRA bucket of hash key and
-- config c to charge `to` tokens (nil: refunds it, its request and its
-- tokens; limiter_adjust): moves the arrival times back or on by the
-- difference.
local function gcra_settle(key, c, cost, to)
    if c.tokens and to ~= cost then
        local delta = ((to or 0) - cost) * c.period / c.tokens
        redis.call('HINCRBYFLOAT', key, 'ttat', delta)
    end
    if to == nil and c.requests then
        redis.call('HINCRBYFLOAT', key, 'rtat', -c.period / c.requests)
    end
end
