-- pbatch_step: records a step of a provider batch (docs/DESIGN.md §3.10),
-- before and after each call to the provider, by the worker holding its
-- lease. The states, in order (each step's provider call between two of
-- them): building -> uploading -> (upload) -> uploaded -> creating ->
-- (create) -> submitted -> (polls) -> collecting -> (settles) -> ended.
-- A worker that takes over a batch in uploading or creating first asks the
-- provider whether the call was made (by the file name or the batch
-- metadata holding the batch's id), so nothing is submitted twice.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  provider batch id   ARGV[2] the worker's name
-- ARGV[3]  the state the worker saw   ARGV[4] the state to record
-- ARGV[5]  next_ms: 0 keeps the lease (extended by ARGV[6] ms); N > 0
--          gives it up: a worker looks at the batch again in N ms
-- ARGV[6]  lease_ms
-- ARGV[7]  keep: '' or k: the batch keeps its first k jobs (its input file
--          held no more) and the rest go back to the head of their staging
--          list (state staged), their estimated tokens given back to the
--          model's batch queue (lib/pbatch.lua pbatch_queue_release: the
--          batch's qtok is then the estimated prompt tokens of the jobs it
--          keeps) and P stats counts them offloaded (pb_offloaded|<model>:
--          lua/offload_stats.lua)
-- ARGV[8..] field, value pairs to set on pb:<id>
-- Reply: 1. Error LLMQ_ECONFLICT when the batch is not in ARGV[3] or its lease
--        is another worker's (that worker took over: this one stops).
-- uses keys: KEY
-- uses pbatch: pbatch_budget_back, pbatch_job_tokens, pbatch_queue_release, pbatch_held
-- uses util: llmq_now_ms, llmq_int_text
local P = KEYS[1]
local id, worker, from, to = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local next_ms, lease_ms = tonumber(ARGV[5]), tonumber(ARGV[6])
if not next_ms or not lease_ms or #ARGV % 2 ~= 1 then
    return redis.error_reply('LLMQ_EINVAL pbatch_step: next_ms, lease_ms, field value pairs')
end
local bk = KEY.pbatch(P, id)
local b, conflict = pbatch_held(P, id, worker, from)
if not b then
    return conflict
end
local now = llmq_now_ms()
local keep = tonumber(ARGV[7])
if keep then
    local jl = KEY.pbatch_jobs(P, id)
    local rest = redis.call('LRANGE', jl, keep, -1)
    if #rest > 0 then
        local name = b[2] .. '|' .. b[3]
        local list = KEY.pb_stage(P, name)
        local back_tokens = 0
        local left = 0 -- jobs of the cut part that ended meanwhile (counted in gone)
        for i = #rest, 1, -1 do
            local jk = KEY.job(P, rest[i])
            if redis.call('HGET', jk, 'pb') == id then
                pbatch_budget_back(P, rest[i]) -- charged again when it joins a batch
                redis.call('HSET', jk, 'state', 'staged', 'pb', '')
                redis.call('LPUSH', list, rest[i])
            else
                left = left + 1
            end
            back_tokens = back_tokens + math.floor(pbatch_job_tokens(P, rest[i]))
        end
        pbatch_queue_release(P, id, back_tokens)
        if left > 0 then
            redis.call('HINCRBY', bk, 'gone', -left)
        end
        redis.call('SADD', KEY.pb_staged(P), name)
        redis.call('LTRIM', jl, 0, keep - 1)
    end
    redis.call('HSET', bk, 'n', keep)
    redis.call('HINCRBY', KEY.stats(P), 'pb_offloaded|' .. b[2], keep)
end
local set = { 'HSET', bk, 'state', to }
for i = 8, #ARGV, 2 do
    set[#set + 1] = ARGV[i]
    set[#set + 1] = ARGV[i + 1]
end
if next_ms > 0 then
    set[#set + 1] = 'owner'
    set[#set + 1] = ''
    redis.call('ZADD', KEY.pbatch_due(P), now + next_ms, id)
else
    set[#set + 1] = 'lease_until'
    set[#set + 1] = llmq_int_text(now + lease_ms)
    redis.call('ZADD', KEY.pbatch_due(P), now + lease_ms, id)
end
redis.call(unpack(set))
return 1
