-- bucket_usage: what each named bucket holds right now (for status; it also
-- drops window entries that aged out). Not the API's token usage of a call
-- (common/openai/usage.c).
-- KEYS[1]  P, the account prefix
-- ARGV...  bucket names
-- Reply: per bucket {name, requests_used, tokens_used, requests_limit,
-- tokens_limit, period_ms, paused_ms, mode, guard_ms, guard_floor_ms,
-- guard_ceiling_ms, lifetime_ms}; limits -1 when unset; guard_*: its
-- arrival guard in force and the bounds it is learned within (all three the
-- pinned value when the policy pins it), lifetime_ms: its grants' lifetime
-- (-1 for no window).
-- uses limiter: limiter_bucket, limiter_flush, limiter_session
-- uses limiter_window: window_guard_range
-- uses util: llmq_now_ms
-- uses views: views_bucket_used
local P = KEYS[1]
local now = llmq_now_ms()
local s = limiter_session(P, 'normal', now)
local out = {}
for i = 1, #ARGV do
    local b = limiter_bucket(s, ARGV[i])
    local c = b.cfg
    local paused = math.max(b.pause - now, 0)
    if c == nil then
        out[#out + 1] = { b.name, 0, 0, -1, -1, 0, paused, '', -1, -1, -1, -1 }
    else
        local req_used, tok_used = views_bucket_used(b, now)
        local guard, lo, hi, lifetime = -1, -1, -1, -1
        if c.mode ~= 'gcra' then
            guard, lifetime = c.guard, c.lifetime
            lo, hi = window_guard_range(s, c)
        end
        out[#out + 1] = { b.name, req_used, tok_used, c.requests or -1, c.tokens or -1, c.period,
            paused, c.mode, guard, lo, hi, lifetime }
    end
end
limiter_flush(s)
return out
