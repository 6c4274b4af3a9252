-- acquire: admit a request into every bucket of its path, all or nothing.
-- KEYS[1]  P, the account prefix "llmq:{ACCOUNT}:"
-- ARGV[1]  model            ARGV[2] tenant ('' for none)   ARGV[3] user ('' for none)
-- ARGV[4]  cost (tokens, integer >= 0)
-- ARGV[5]  priority: high | normal | low
-- Reply (array):
--   granted:     {1, resid, now_ms, handle, '', '', limits...}
--   denied:      {0, wait_ms, now_ms, bucket, reason, level, limits...}
--                reason: requests | tokens | pause; level: model | tenant | user
--   never fits:  {-1, cost, now_ms, bucket, reason, limit, limits...}
-- limits...: {bucket, requests, tokens, period_ms}* (-1 = no limit), so the
-- client can run a local share of them when Redis is unreachable.
local P = KEYS[1]
local cost = llmq_int_arg(ARGV[4], 'cost')
if cost < 0 then
    return redis.error_reply('LLMQ_EINVAL cost must be >= 0')
end
local now = llmq_now_ms()
local path = limiter_path(ARGV[1], ARGV[2], ARGV[3])
local d = limiter_decide(P, path, cost, ARGV[5], now)
local head
if d.status == 'granted' then
    local handle, resid = limiter_commit(P, d, cost, now)
    head = { 1, resid, now, handle, '', '' }
elseif d.status == 'denied' then
    head = { 0, d.wait, now, d.bucket, d.reason, d.level }
else
    head = { -1, cost, now, d.bucket, d.reason, d.limit }
end
local limits = limiter_limits_flat(path)
for i = 1, #limits do
    head[#head + 1] = limits[i]
end
return head
