-- pbatch_cancel: `llmq offload cancel ID`: cancels provider batch ID of
-- llmq's and every job still in it (state offloaded, field pb = ID), which
-- end cancelled as job_cancel ends a job that was not sent (their lines, if
-- they come back, are ignored: pbatch_settle touches only jobs still
-- offloaded). The batch is marked to be cancelled at the provider (field
-- cancel: the worker that takes it next sends POST /v1/batches/{id}/cancel,
-- or, not submitted yet, ends it without creating it) and, when no worker
-- holds it, is due now (P pba).
-- KEYS[1]  P, the account prefix
-- ARGV[1]  the provider batch's llmq id (pb-...)
-- Reply: {cancelled jobs, state of the batch}. Error LLMQ_ENOTFOUND when
--        there is no such batch.
-- uses jobs: llmq_job_finish
-- uses keys: KEY
-- uses pbatch: pbatch_cancel_mark, pbatch_budget_back
-- uses util: llmq_now_ms
-- uses worker: worker_error_line
local P = KEYS[1]
local id = ARGV[1]
local bk = KEY.pbatch(P, id)
local b = redis.call('HMGET', bk, 'state', 'owner')
if not b[1] then
    return redis.error_reply('LLMQ_ENOTFOUND no provider batch ' .. tostring(id))
end
local now = llmq_now_ms()
local cancelled = 0
for _, jid in ipairs(redis.call('LRANGE', KEY.pbatch_jobs(P, id), 0, -1)) do
    local j = redis.call('HMGET', KEY.job(P, jid), 'state', 'pb')
    if j[1] == 'offloaded' and j[2] == id then
        redis.call('HSET', KEY.job(P, jid), 'cancel', 1)
        redis.call('ZREM', KEY.pb_deadlines(P), jid)
        pbatch_budget_back(P, jid)
        if llmq_job_finish(P, jid, 'cancelled', worker_error_line(jid, 'cancelled',
            'cancelled with its provider batch ' .. id), 'cancelled', now) == 1 then
            cancelled = cancelled + 1
        end
    end
end
if b[1] ~= 'ended' and b[1] ~= 'collecting' then
    pbatch_cancel_mark(P, id, b[2], now)
end
return { cancelled, b[1] }
