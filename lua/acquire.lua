-- acquire: admit requests into every bucket of their path, each all or
-- nothing. Several costs on one path are decided in order in one call (one
-- round trip feeds many requests); deciding stops at the first denial.
-- KEYS[1]  P, the account prefix "llmq:{ACCOUNT}:"
-- ARGV[1]  model            ARGV[2] tenant ('' for none)   ARGV[3] user ('' for none)
-- ARGV[4]  priority: high | normal | low
-- ARGV[5..] costs (tokens, integers >= 0), at least one
-- Reply (array):
--   [1] granted count g   [2] now_ms (Redis TIME; the admission time of grants)
--   [3] 0 all granted | 1 denied | -1 never fits (for request g+1)
--   [4] denied: wait_ms | never fits: its cost     [5] bucket   [6] reason
--   [7] denied: level (model|tenant|user) | never fits: the bucket's limit
--   [8] id of the first grant (grant i has id [8] + i - 1)
--   [9] handle tail: grant i's reservation handle is
--       "<id>|<cost>|<now_ms>" .. [9]
--   [10] L, then L x {bucket, requests, tokens, period_ms} (-1 = no limit), so
--       the client can run a local share of them when Redis is unreachable.
-- uses limiter: limiter_flush, limiter_limits_flat, limiter_path, limiter_reserve_ids
-- uses limiter: limiter_session, limiter_try
-- uses util: llmq_int_arg, llmq_now_ms
local P = KEYS[1]
if #ARGV < 5 then
    return redis.error_reply('LLMQ_EINVAL acquire needs model, tenant, user, priority, cost...')
end
local now = llmq_now_ms()
local s = limiter_session(P, ARGV[4], now)
local path = limiter_path(s, ARGV[1], ARGV[2], ARGV[3])
local first_id = limiter_reserve_ids(s, #ARGV - 4)
local granted = 0
local stop = { 0, 0, '', '', '' }
for i = 5, #ARGV do
    local cost = llmq_int_arg(ARGV[i], 'cost')
    if cost < 0 then
        return redis.error_reply('LLMQ_EINVAL cost must be >= 0')
    end
    local status, a, b, c, d = limiter_try(s, path, cost, ARGV[i])
    if status == 'granted' then
        granted = granted + 1
    elseif status == 'denied' then
        stop = { 1, a, b, c, d }
        break
    else
        stop = { -1, cost, a, b, c }
        break
    end
end
limiter_flush(s)
local reply = { granted, now, stop[1], stop[2], stop[3], stop[4], stop[5], first_id, path.tags, 0 }
limiter_limits_flat(path, reply)
reply[10] = (#reply - 10) / 4
return reply
