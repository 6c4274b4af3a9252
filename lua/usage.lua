-- usage: what each named bucket holds right now (read for status; it also
-- drops window entries that aged out).
-- KEYS[1]  P, the account prefix
-- ARGV...  bucket names
-- Reply: per bucket {name, requests_used, tokens_used, requests_limit,
-- tokens_limit, period_ms, paused_ms, mode}; limits -1 when unset. Buckets
-- without limits report zeros and -1.
local P = KEYS[1]
local now = llmq_now_ms()
local out = {}
for i = 1, #ARGV do
    local b = { name = ARGV[i] }
    b.cfg = limiter_config(P, b)
    if b.cfg == nil then
        out[#out + 1] = { b.name, 0, 0, -1, -1, 0, 0, '' }
    else
        limiter_load(P, b, now)
        local c = b.cfg
        local req_used, tok_used
        if c.mode == 'gcra' then
            -- Units still "in the bucket": (tat - now) / emission interval.
            req_used = c.requests and math.ceil((b.rtat - now) * c.requests / c.period) or 0
            tok_used = c.tokens and math.ceil((b.ttat - now) * c.tokens / c.period) or 0
        else
            req_used, tok_used = b.count, b.tok
        end
        out[#out + 1] = { b.name, req_used, tok_used, c.requests or -1, c.tokens or -1, c.period,
            math.max(b.pause - now, 0), c.mode }
    end
end
return out
