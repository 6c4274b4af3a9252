-- pbatch_end: ends a provider batch once its output and error files are
-- settled (lua/pbatch_settle.lua), or once the provider ended it without
-- answering every line (failed, expired, cancelled): every job still in it
-- (state offloaded, field pb = the batch) goes back to staging for the
-- next provider batch, with an attempt counted when ARGV[4] says so (a
-- batch that failed as a whole), dead-lettered when that was its last.
-- KEYS[1]  P, the account prefix
-- ARGV[1]  provider batch id   ARGV[2] the worker's name (its lease holder)
-- ARGV[3]  reason ('' none: every line came back)   ARGV[4] '1': count an attempt
-- Reply: {restaged, dead}. Error LLMQ_ECONFLICT when the lease is another
--        worker's.
-- uses: llmq_job_finish, llmq_jobs_finish_flush, llmq_jobs_settings, llmq_now_ms
-- uses: pbatch_stage, worker_error_line, llmq_int_text
-- uses: KEY
local P = KEYS[1]
local id, worker, reason, count = ARGV[1], ARGV[2], ARGV[3] or '', ARGV[4] == '1'
local bk = KEY.pbatch(P, id)
local b = redis.call('HMGET', bk, 'owner', 'model', 'url')
if b[1] ~= worker then
    return redis.error_reply('LLMQ_ECONFLICT provider batch ' .. id .. ' is held by ' ..
        tostring(b[1]))
end
local now = llmq_now_ms()
local s = llmq_jobs_settings(P)
local tally = {}
local restaged, dead = 0, 0
for _, jid in ipairs(redis.call('LRANGE', KEY.pbatch_jobs(P, id), 0, -1)) do
    local jk = KEY.job(P, jid)
    local j = redis.call('HMGET', jk, 'state', 'pb', 'attempts', 'max_attempts')
    if j[1] == 'offloaded' and j[2] == id then
        local attempts = (tonumber(j[3]) or 0) + (count and 1 or 0)
        if count and attempts >= (tonumber(j[4]) or 1) then
            redis.call('HSET', jk, 'attempts', attempts)
            local why = 'provider batch ' .. id .. ': ' .. reason
            llmq_job_finish(P, jid, 'dead', worker_error_line(jid, 'batch_failed', why), why,
                now, s, tally)
            dead = dead + 1
        else
            redis.call('HSET', jk, 'attempts', attempts, 'last_error', reason)
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
