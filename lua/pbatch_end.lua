-- pbatch_end: ends a provider batch once its output and error files are
-- settled (lua/pbatch_settle.lua), or once the provider ended it without
-- answering every line (failed, expired, cancelled), or once llmq gave up on
-- it: every job still in it (state offloaded, field pb = the batch) goes
-- back to staging for the next provider batch, how by ARGV[4]:
--   ''       no attempt counted (expired, cancelled: the jobs were not at
--            fault)
--   attempt  an attempt counted, dead-lettered when that was its last (the
--            batch could never be collected)
--   failed   the provider failed the batch as a whole (its validation, or a
--            refused upload or create): the first time a job is in such a
--            batch it goes back without an attempt (job field pb_fails);
--            the second time, it is dead-lettered with the provider's
--            reason when the provider named it (ARGV[5..]), or when the
--            provider named no line at all (the whole file is refused)
--   limit    the provider refused the batch for its enqueued-token limit
--            (token_limit_exceeded): no attempt counted, the model's batch
--            queue learns (pbatch_queue_learn) the limit ARGV[5] the
--            provider named ('' none named)
-- KEYS[1]  P, the account prefix
-- ARGV[1]  provider batch id   ARGV[2] the worker's name (its lease holder)
-- ARGV[3]  reason ('' none: every line came back)
-- ARGV[4]  '', 'attempt', 'failed' or 'limit'
-- ARGV[5..] with failed: pairs of job id and the provider's reason for it
-- The batch's charge on its model's batch queue is given back.
-- Reply: {restaged, dead}. Error LLMQ_ECONFLICT when the lease is another
--        worker's.
-- uses jobs: llmq_job_finish, llmq_jobs_finish_flush, llmq_jobs_settings
-- uses keys: KEY
-- uses pbatch: pbatch_stage, pbatch_budget_back, pbatch_queue_learn, pbatch_queue_release
-- uses pbatch: pbatch_held, pbatch_bucket
-- uses util: llmq_now_ms, llmq_int_text
-- uses worker: worker_error_line
local P = KEYS[1]
local id, worker, reason, mode = ARGV[1], ARGV[2], ARGV[3] or '', ARGV[4] or ''
local refused_for_limit = mode == 'limit'
if refused_for_limit then
    if #ARGV > 5 then
        return redis.error_reply('LLMQ_EINVAL pbatch_end: limit takes one value')
    end
elseif mode ~= '' and mode ~= 'attempt' and mode ~= 'failed' or #ARGV % 2 ~= 0 then
    return redis.error_reply('LLMQ_EINVAL pbatch_end: mode and job id, reason pairs')
end
local bk = KEY.pbatch(P, id)
local b, conflict = pbatch_held(P, id, worker)
if not b then
    return conflict
end
local named = {}
local any_named = false
for i = 5, refused_for_limit and 0 or #ARGV, 2 do
    named[ARGV[i]] = ARGV[i + 1]
    any_named = true
end
local now = llmq_now_ms()
if refused_for_limit then
    pbatch_queue_learn(P, id, b[2], tonumber(ARGV[5] or ''), now)
elseif reason == '' then
    redis.call('HDEL', KEY.pb_queue(P, pbatch_bucket(P, id) or b[2]), 'refusals') -- it took one
end
pbatch_queue_release(P, id)
local s = llmq_jobs_settings(P)
local tally = {}
local restaged, dead = 0, 0

local function bury(jid, why, code)
    local text = 'provider batch ' .. id .. ': ' .. why
    redis.call('ZREM', KEY.pb_deadlines(P), jid)
    pbatch_budget_back(P, jid)
    if llmq_job_finish(P, jid, 'dead', worker_error_line(jid, code, text), text, now, s,
        tally) == 1 then
        dead = dead + 1
    end
end

for _, jid in ipairs(redis.call('LRANGE', KEY.pbatch_jobs(P, id), 0, -1)) do
    local jk = KEY.job(P, jid)
    local j = redis.call('HMGET', jk, 'state', 'pb', 'attempts', 'max_attempts', 'pb_fails')
    if j[1] == 'offloaded' and j[2] == id then
        local attempts = (tonumber(j[3]) or 0) + (mode == 'attempt' and 1 or 0)
        local fails = (tonumber(j[5]) or 0) + (mode == 'failed' and 1 or 0)
        if mode == 'attempt' and attempts >= (tonumber(j[4]) or 1) then
            redis.call('HSET', jk, 'attempts', attempts)
            bury(jid, reason, 'batch_failed')
        elseif mode == 'failed' and fails >= 2 and (named[jid] or not any_named) then
            redis.call('HSET', jk, 'pb_fails', fails)
            bury(jid, named[jid] or reason, 'batch_failed')
        else
            redis.call('HSET', jk, 'attempts', attempts, 'last_error', reason)
            if mode == 'failed' and (named[jid] or not any_named) then
                redis.call('HSET', jk, 'pb_fails', fails)
            end
            pbatch_stage(P, jid, b[2], b[3])
            restaged = restaged + 1
        end
    end
end
llmq_jobs_finish_flush(P, tally, s, now)
redis.call('HSET', bk, 'state', 'ended', 'ended_ms', llmq_int_text(now), 'owner', '',
    'reason', reason)
redis.call('HINCRBY', bk, 'restaged', restaged)
redis.call('HINCRBY', bk, 'dead', dead)
redis.call('ZREM', KEY.pbatch_due(P), id)
-- lua/offload_stats.lua: batches ended and jobs dead-lettered, per model
redis.call('HINCRBY', KEY.stats(P), 'pb_ended|' .. b[2], 1)
if dead > 0 then
    redis.call('HINCRBY', KEY.stats(P), 'pb_failed|' .. b[2], dead)
end
return { restaged, dead }
