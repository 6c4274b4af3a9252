-- budget_list: every spend budget of the account with its spend in the
-- period that holds now (lua/lib/budget.lua), and what waits on it. Reads
-- only.
-- KEYS[1]  P, the account prefix
-- Reply: one array per budget, ordered by id:
--   {id, scope, unit (tokens|usd), limit, period, on_exhaust, spent,
--    period_start_ms, period_end_ms, parked_nodes, parked_jobs}
--   limit and spent in tokens or nano-USD; parked_nodes: the scheduler's
--   nodes blocked on it now; parked_jobs: the jobs queued under them
--   ("waiting for budget"; counted up to 100000).
-- uses budget: budget_load
-- uses keys: KEY
-- uses util: llmq_hash_table, llmq_int_text, llmq_now_ms, llmq_split
local P = KEYS[1]
local now = llmq_now_ms()
local PARKED_MAX = 100000

-- Jobs queued under node path (a key, a tenant or a model node), at most max.
local function jobs_under(path, max)
    local depth = #llmq_split(path, '|')
    if depth == 4 then
        return redis.call('LLEN', KEY.key_queue(P, path))
    end
    local n = 0
    local kids = redis.call('ZRANGE', depth == 3 and KEY.sched_users(P, path) or
        KEY.sched_tenants(P, path), 0, 999)
    for _, k in ipairs(kids) do
        if n >= max then
            break
        end
        n = n + jobs_under(path .. '|' .. k, max - n)
    end
    return n
end

local ids = {}
for _, v in pairs(llmq_hash_table(redis.call('HGETALL', KEY.budgets(P)))) do
    for id in string.gmatch(v, '%S+') do
        ids[#ids + 1] = id
    end
end
table.sort(ids)
local bs = { P = P, now = now, loaded = {} }
local out = {}
for _, id in ipairs(ids) do
    local b = budget_load(bs, id)
    if b then
        local v = redis.call('HMGET', b.key, 'period', 'on_exhaust')
        local nodes, jobs = 0, 0
        local idx = redis.call('ZRANGE', KEY.blocked_on(P, '$' .. id), 0, -1, 'WITHSCORES')
        for i = 1, #idx, 2 do
            if tonumber(redis.call('ZSCORE', KEY.sched_blocked(P), idx[i])) == tonumber(idx[i + 1]) then
                nodes = nodes + 1
                if jobs < PARKED_MAX then
                    jobs = jobs + jobs_under(idx[i], PARKED_MAX - jobs)
                end
            end
        end
        out[#out + 1] = { id, b.scope, b.usd and 'usd' or 'tokens', llmq_int_text(b.limit), v[1],
            v[2] or 'park', llmq_int_text(b.spent), llmq_int_text(b.start), llmq_int_text(b.stop),
            nodes, jobs }
    end
end
return out
